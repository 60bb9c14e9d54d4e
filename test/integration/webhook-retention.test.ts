import { beforeAll, describe, expect, test } from 'bun:test'
import { and, eq, inArray } from 'drizzle-orm'
import { webhookDeliveries, webhookMessages } from '../../src/db/schema'
import { FakeClock } from '../../src/lib/clock'
import { newId } from '../../src/lib/ids'
import { DeliveryQueueRepository } from '../../src/modules/webhook-endpoints/repository'
import { purgeExpiredMessages } from '../../src/modules/webhook-endpoints/retention'
import { createSignedInUser, createWebhookEndpoint } from '../helpers/factories'
import { makeTestApp, testDatabase } from '../helpers/test-app'

beforeAll(async () => {
  await testDatabase()
}, 60_000)

const DAY = 24 * 3600_000

describe('webhook message retention', () => {
  test('old finished messages go after LOG_RETENTION_DAYS; pending ones stay whatever their age', async () => {
    const clock = new FakeClock(Date.UTC(2025, 0, 1))
    const { ctx, services } = await makeTestApp({ clock, env: { LOG_RETENTION_DAYS: '30' } })
    const { organization } = await createSignedInUser(ctx)
    const endpoint = await createWebhookEndpoint(services, organization.id)
    const service = services.webhookEndpoints
    const finished = await service.ping(organization.id, endpoint.id)
    const stillPending = await service.ping(organization.id, endpoint.id)
    clock.advance(29 * DAY)
    const recent = await service.ping(organization.id, endpoint.id)
    await ctx.db
      .update(webhookDeliveries)
      .set({ status: 'succeeded' })
      .where(inArray(webhookDeliveries.messageId, [finished, recent]))
    // Messages of a deleted endpoint are left without deliveries: they go too once old.
    const doomed = await createWebhookEndpoint(services, organization.id)
    clock.set(Date.UTC(2025, 0, 1))
    const orphan = await service.ping(organization.id, doomed.id)
    await service.remove(organization.id, doomed.id)

    clock.set(Date.UTC(2025, 0, 1) + 31 * DAY)
    await purgeExpiredMessages(ctx)
    const ids = [finished, stillPending, recent, orphan]
    const messages = await ctx.db
      .select({ id: webhookMessages.id })
      .from(webhookMessages)
      .where(inArray(webhookMessages.id, ids))
    expect(messages.map((row) => row.id).sort()).toEqual([stillPending, recent].sort())
    const deliveries = await ctx.db
      .select({ id: webhookDeliveries.messageId })
      .from(webhookDeliveries)
      .where(and(eq(webhookDeliveries.endpointId, endpoint.id), inArray(webhookDeliveries.messageId, ids)))
    expect(deliveries.map((row) => row.id).sort()).toEqual([stillPending, recent].sort())
  })

  // No foreign key from deliveries to endpoints (drizzle/0015): an ingest group that read the
  // endpoint before its delete and commits after it leaves a delivery the delete trigger could not
  // see. Nothing may send it, and it must not stay for ever.
  test('a delivery whose endpoint is gone is never claimed, and goes once old even while pending', async () => {
    // Long before any other test's clock: the claim (not scoped to an organization) finds only
    // this test's deliveries due.
    const clock = new FakeClock(Date.UTC(2001, 0, 1))
    const { ctx, services } = await makeTestApp({ clock, env: { LOG_RETENTION_DAYS: '30' } })
    const { organization } = await createSignedInUser(ctx)
    const endpoint = await createWebhookEndpoint(services, organization.id)
    const live = await services.webhookEndpoints.ping(organization.id, endpoint.id)
    const goneEndpointId = newId()
    await ctx.db.insert(webhookDeliveries).values({
      messageId: live,
      endpointId: goneEndpointId,
      organizationId: organization.id,
      eventType: 'lead.created',
      nextAttemptAt: new Date(clock.now()),
      createdAt: new Date(clock.now()),
    })

    const claimed = await new DeliveryQueueRepository(ctx).claim({
      now: new Date(clock.now()),
      leaseUntil: new Date(clock.now() + 20_000),
      token: newId(),
      limit: 100,
      perEndpoint: 32,
      inFlight: {},
    })
    expect(
      claimed
        .filter((row) => row.organization_id === organization.id)
        .map((row) => [row.endpoint_id, row.message_id]),
    ).toEqual([[endpoint.id, live]])

    clock.set(Date.UTC(2001, 0, 1) + 31 * DAY)
    await purgeExpiredMessages(ctx)
    const left = await ctx.db
      .select({ endpointId: webhookDeliveries.endpointId, status: webhookDeliveries.status })
      .from(webhookDeliveries)
      .where(eq(webhookDeliveries.messageId, live))
    // The live endpoint's delivery is still pending (claimed, its lease running): it stays.
    expect(left).toEqual([{ endpointId: endpoint.id, status: 'pending' }])
  })
})
