import { afterEach, beforeAll, describe, expect, test } from 'bun:test'
import { eq, sql } from 'drizzle-orm'
import { personalAccessTokens } from '../../src/db/schema'
import { FakeClock } from '../../src/lib/clock'
import {
  announceExpiringTokens,
  announceSourceStatusChanges,
} from '../../src/modules/webhook-endpoints/events'
import { EVENT_TYPES } from '../../src/modules/webhook-endpoints/model'
import { createPat, createSignedInUser, createSource, createWebhookEndpoint } from '../helpers/factories'
import { makeTestApp, request, testDatabase } from '../helpers/test-app'
import { signedWith, startReceiver } from '../helpers/webhook-receiver'

beforeAll(async () => {
  await testDatabase()
}, 60_000)

const receivers: Array<ReturnType<typeof startReceiver>> = []
afterEach(() => {
  for (const receiver of receivers.splice(0)) receiver.stop()
})

const DAY = 24 * 3600_000

async function setup(eventTypes: string[] = [], receiverOptions: { checkContract?: boolean } = {}) {
  const clock = new FakeClock(Date.UTC(2026, 8, 1, 12))
  const { app, ctx, services } = await makeTestApp({ clock })
  const { organization, user } = await createSignedInUser(ctx)
  const receiver = startReceiver(undefined, receiverOptions)
  receivers.push(receiver)
  const endpoint = await createWebhookEndpoint(services, organization.id, {
    url: receiver.url,
    event_types: eventTypes as never,
  })
  return {
    app,
    ctx,
    services,
    clock,
    organization,
    user,
    receiver,
    endpoint,
    worker: services.deliveryWorker,
  }
}

describe('webhook events: pat.expiring', () => {
  test('sent once, 7 days before expiry, with the token id, name and owner e-mail', async () => {
    const { ctx, services, clock, user, receiver, endpoint, worker } = await setup(['pat.expiring'])
    const expiresAt = new Date(clock.now() + 8 * DAY)
    const pat = await createPat(ctx, user, { name: 'CI deploy', expiresAt })
    // Other organizations' and unannounceable tokens: never.
    const stranger = await createSignedInUser(ctx)
    await createPat(ctx, stranger.user, { expiresAt: new Date(clock.now() + 2 * DAY) })
    await createPat(ctx, user, { expiresAt: null })
    await createPat(ctx, user, { expiresAt: new Date(clock.now() - DAY) })

    await announceExpiringTokens(ctx, services.webhookEndpoints)
    await worker.deliverDue()
    expect(receiver.received.filter((entry) => entry.json.data.token_id === pat.tokenId)).toHaveLength(0)

    clock.advance(DAY + 1000)
    await announceExpiringTokens(ctx, services.webhookEndpoints)
    await announceExpiringTokens(ctx, services.webhookEndpoints)
    await worker.deliverDue()
    expect(receiver.received.map((entry) => entry.json)).toEqual([
      {
        type: 'pat.expiring',
        timestamp: new Date(clock.now()).toISOString(),
        data: {
          token_id: pat.tokenId,
          name: 'CI deploy',
          owner_email: user.email,
          expires_at: expiresAt.toISOString(),
        },
      },
    ])
    expect(signedWith(endpoint.secret, receiver.received[0]!)).toBe(true)
  })
})

describe('webhook events: pat.expiring is never lost', () => {
  test('a failed event write leaves the token unannounced; the next run sends it', async () => {
    const { ctx, services, clock, user, organization, receiver, worker } = await setup(['pat.expiring'])
    const pat = await createPat(ctx, user, { expiresAt: new Date(clock.now() + 3 * DAY) })
    // The write of this organization's event fails after the token was marked (a crash between
    // the two, as the database sees it): nothing of the run may stay.
    const trigger = `refuse_pat_event_${organization.id.replaceAll('-', '')}`
    await ctx.db.execute(
      sql.raw(`create function ${trigger}() returns trigger language plpgsql as $$
        begin raise exception 'refused for the test'; end $$`),
    )
    await ctx.db.execute(
      sql.raw(`create trigger ${trigger} before insert on webhook_messages for each row
        when (new.organization_id = '${organization.id}'::uuid) execute function ${trigger}()`),
    )
    try {
      await expect(announceExpiringTokens(ctx, services.webhookEndpoints)).rejects.toThrow()
    } finally {
      await ctx.db.execute(sql.raw(`drop trigger ${trigger} on webhook_messages`))
      await ctx.db.execute(sql.raw(`drop function ${trigger}()`))
    }
    const [row] = await ctx.db
      .select({ noticeAt: personalAccessTokens.expiryNoticeAt })
      .from(personalAccessTokens)
      .where(eq(personalAccessTokens.id, pat.tokenId))
    expect(row!.noticeAt).toBeNull()

    expect(await announceExpiringTokens(ctx, services.webhookEndpoints)).toBeGreaterThanOrEqual(1)
    await worker.deliverDue()
    expect(receiver.received.map((entry) => entry.json.data.token_id)).toEqual([pat.tokenId])
  })
})

describe('webhook events: source.status_changed (the failure alert)', () => {
  test('healthy → failing is sent with the health summary; the first status seen is a baseline', async () => {
    const { app, ctx, services, organization, receiver, endpoint, worker } = await setup([
      'source.status_changed',
    ])
    const { source, apiKey } = await createSource(ctx, organization.id, { name: 'Landing page' })
    const post = (json: unknown) => app.handle(request('POST', `/api/webhook/lead/${apiKey}`, { json }))
    expect((await post({ email: 'ok@example.com' })).status).toBe(200)

    expect(
      await announceSourceStatusChanges(ctx, {
        health: services.deliveryLogs,
        service: services.webhookEndpoints,
      }),
    ).toBe(0)
    for (let index = 0; index < 5; index++) await post({ first_name: 'no contact' })
    expect(
      await announceSourceStatusChanges(ctx, {
        health: services.deliveryLogs,
        service: services.webhookEndpoints,
      }),
    ).toBe(1)
    expect(
      await announceSourceStatusChanges(ctx, {
        health: services.deliveryLogs,
        service: services.webhookEndpoints,
      }),
    ).toBe(0)
    await worker.deliverDue()

    expect(receiver.received).toHaveLength(1)
    const { json } = receiver.received[0]!
    expect(json).toMatchObject({
      type: 'source.status_changed',
      data: {
        source: { id: source.id, name: 'Landing page' },
        previous_status: 'healthy',
        status: 'failing',
        health: {
          source_id: source.id,
          status: 'failing',
          totals: expect.objectContaining({ requests: 6, created: 1, error: 5 }),
          last_failure: expect.objectContaining({ reason: 'missing_contact' }),
        },
      },
    })
    expect(Object.keys(json.data.health as object)).not.toContain('hourly')
    expect(signedWith(endpoint.secret, receiver.received[0]!)).toBe(true)
  })

  test('an endpoint filtered on another source does not watch this one', async () => {
    const { ctx, services, organization, receiver } = await setup(['source.status_changed'])
    const watched = await createSource(ctx, organization.id)
    const unwatched = await createSource(ctx, organization.id)
    const other = startReceiver()
    receivers.push(other)
    await createWebhookEndpoint(services, organization.id, {
      url: other.url,
      event_types: ['source.status_changed'],
      source_ids: [watched.source.id],
    })
    await announceSourceStatusChanges(ctx, {
      health: services.deliveryLogs,
      service: services.webhookEndpoints,
    })
    // Disabled: its status goes from idle to disabled.
    await ctx.database.query('update webhook_sources set enabled = false where id = $1', [
      unwatched.source.id,
    ])
    await announceSourceStatusChanges(ctx, {
      health: services.deliveryLogs,
      service: services.webhookEndpoints,
    })
    await services.deliveryWorker.deliverDue()
    expect(receiver.received.map((entry) => entry.json.data.status)).toEqual(['disabled'])
    expect(other.received).toHaveLength(0)
  })
})

describe('webhook events: every type reaches a subscribed endpoint, and only those', () => {
  test('an endpoint subscribed to one type gets no other', async () => {
    for (const type of EVENT_TYPES) {
      // Made-up payloads (`{probe}`): this test is about routing by type, not their shape.
      const { ctx, services, organization, receiver, worker } = await setup([type], { checkContract: false })
      const service = services.webhookEndpoints
      for (const other of EVENT_TYPES) {
        if (other === 'ping') continue
        await service.enqueue({
          id: crypto.randomUUID(),
          organizationId: organization.id,
          type: other,
          data: { probe: other },
          createdAt: new Date(ctx.clock.now()),
        })
      }
      await worker.deliverDue()
      expect(receiver.received.map((entry) => entry.json.type)).toEqual(type === 'ping' ? [] : [type])
    }
  })
})
