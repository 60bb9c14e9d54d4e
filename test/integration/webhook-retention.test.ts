import { beforeAll, describe, expect, test } from 'bun:test'
import { and, eq, inArray } from 'drizzle-orm'
import { webhookDeliveries, webhookMessages } from '../../src/db/schema'
import { FakeClock } from '../../src/lib/clock'
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
})
