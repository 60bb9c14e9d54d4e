import { afterEach, beforeAll, describe, expect, test } from 'bun:test'
import { randomBytes } from 'node:crypto'
import { and, eq } from 'drizzle-orm'
import { Webhook } from 'standardwebhooks'
import type { AppContext } from '../../src/context'
import { webhookAttempts, webhookDeliveries, webhookEndpoints, webhookMessages } from '../../src/db/schema'
import { FakeClock } from '../../src/lib/clock'
import { newId } from '../../src/lib/ids'
import { SecretBox } from '../../src/lib/secrets'
import {
  IN_FLIGHT_PER_ENDPOINT,
  nextAttemptTime,
  parseRetryAfter,
  RETRY_SCHEDULE_MS,
} from '../../src/modules/webhook-endpoints/worker'
import { cliInProcess } from '../helpers/cli'
import { createSignedInUser, createSource, createWebhookEndpoint } from '../helpers/factories'
import { call, makeTestApp, request, testDatabase } from '../helpers/test-app'
import { signedWith, startReceiver } from '../helpers/webhook-receiver'

beforeAll(async () => {
  await testDatabase()
}, 60_000)

const receivers: Array<ReturnType<typeof startReceiver>> = []
afterEach(() => {
  for (const receiver of receivers.splice(0)) receiver.stop()
})
function receiver(...args: Parameters<typeof startReceiver>) {
  const started = startReceiver(...args)
  receivers.push(started)
  return started
}

const BASE = '/api/v2/webhook-endpoints'

async function setup(options: { clock?: FakeClock; env?: Record<string, string> } = {}) {
  const { app, ctx, services } = await makeTestApp(options)
  const { organization, token } = await createSignedInUser(ctx)
  return { app, ctx, services, organization, token, worker: services.deliveryWorker }
}

async function deliveryOf(ctx: AppContext, endpointId: string, messageId: string) {
  const [row] = await ctx.db
    .select()
    .from(webhookDeliveries)
    .where(and(eq(webhookDeliveries.endpointId, endpointId), eq(webhookDeliveries.messageId, messageId)))
  return row!
}

async function attemptsOf(ctx: AppContext, endpointId: string, messageId: string) {
  return ctx.db
    .select()
    .from(webhookAttempts)
    .where(and(eq(webhookAttempts.endpointId, endpointId), eq(webhookAttempts.messageId, messageId)))
    .orderBy(webhookAttempts.id)
}

describe('webhook delivery: signed requests to a real receiver', () => {
  test('lead.created arrives signed per Standard Webhooks, and the attempt is recorded', async () => {
    const { app, ctx, services, organization, token, worker } = await setup()
    const target = receiver(() => new Response('thanks', { status: 202 }))
    const endpoint = await createWebhookEndpoint(services, organization.id, { url: target.url })
    const { apiKey, source } = await createSource(ctx, organization.id, { name: 'Site' })
    const posted = await app.handle(
      request('POST', `/api/webhook/lead/${apiKey}`, {
        json: { email: 'ada@example.com', first_name: 'Ada' },
      }),
    )
    const { lead_id: leadId } = await posted.json()
    await worker.deliverDue()

    expect(target.received).toHaveLength(1)
    const [delivered] = target.received
    // The receiver's side, with the same library.
    const verified = new Webhook(endpoint.secret).verify(delivered!.body, delivered!.headers) as Record<
      string,
      unknown
    >
    const lead = await (await call(app, token, 'GET', `/api/v2/leads/${leadId}`)).json()
    expect(verified).toEqual({
      type: 'lead.created',
      timestamp: expect.stringMatching(/Z$/),
      data: { lead, source: { id: source.id, name: 'Site' }, delivery_log_id: expect.any(String) },
    })
    expect(delivered!.headers).toMatchObject({
      'content-type': 'application/json',
      'webhook-id': (verified.data as { delivery_log_id: string }).delivery_log_id,
      'webhook-timestamp': expect.stringMatching(/^\d{10}$/),
      'webhook-signature': expect.stringMatching(/^v1,[A-Za-z0-9+/=]+$/),
    })

    const messages = await (await call(app, token, 'GET', `${BASE}/${endpoint.id}/messages`)).json()
    expect(messages.data).toEqual([
      expect.objectContaining({
        id: delivered!.headers['webhook-id'],
        event_type: 'lead.created',
        status: 'succeeded',
        attempt_count: 1,
        next_attempt_at: null,
        payload: verified,
        attempts: [expect.objectContaining({ response_status: 202, response_body: 'thanks', error: null })],
      }),
    ])
    const record = await (await call(app, token, 'GET', `${BASE}/${endpoint.id}`)).json()
    expect(record.stats).toMatchObject({ pending: 0, succeeded: 1, failed: 0 })
  })

  // Messages written before drizzle/0018 kept a lead event's data in `payload`; they are sent and
  // listed as stored, next to the ones rendered from their columns.
  test('a lead event stored with its payload (before drizzle/0018) is sent and listed as stored', async () => {
    const { app, ctx, services, organization, token, worker } = await setup()
    const target = receiver()
    const endpoint = await createWebhookEndpoint(services, organization.id, { url: target.url })
    const messageId = newId()
    const at = new Date(ctx.clock.now())
    const sourceId = newId()
    const stored = {
      lead: {
        lead_id: newId(),
        source_id: sourceId,
        first_name: 'Old',
        last_name: null,
        email: 'old@example.com',
        phone_raw: null,
        phone_e164: null,
        status: 'new',
        custom_fields: { note: 'ünïcode "quoted"' },
        attribution: {},
        created_at: at.toISOString(),
        updated_at: at.toISOString(),
      },
      source: { id: sourceId, name: 'Old form' },
      delivery_log_id: messageId,
    }
    await ctx.db.insert(webhookMessages).values({
      id: messageId,
      organizationId: organization.id,
      eventType: 'lead.created',
      payload: stored,
      createdAt: at,
    })
    await ctx.db.insert(webhookDeliveries).values({
      messageId,
      endpointId: endpoint.id,
      organizationId: organization.id,
      eventType: 'lead.created',
      nextAttemptAt: at,
      createdAt: at,
    })
    await worker.deliverDue()
    expect(target.received).toHaveLength(1)
    const verified = new Webhook(endpoint.secret).verify(
      target.received[0]!.body,
      target.received[0]!.headers,
    ) as Record<string, unknown>
    expect(verified).toEqual({ type: 'lead.created', timestamp: at.toISOString(), data: stored })
    const messages = await (await call(app, token, 'GET', `${BASE}/${endpoint.id}/messages`)).json()
    expect(messages.data).toEqual([
      expect.objectContaining({ id: messageId, status: 'succeeded', payload: verified }),
    ])
  })

  test('ping: POST …/test queues one for this endpoint only, whatever its filter', async () => {
    const { app, services, organization, token, worker } = await setup()
    const target = receiver()
    const other = receiver()
    const endpoint = await createWebhookEndpoint(services, organization.id, {
      url: target.url,
      event_types: ['lead.created'],
    })
    await createWebhookEndpoint(services, organization.id, { url: other.url })
    const response = await call(app, token, 'POST', `${BASE}/${endpoint.id}/test`)
    expect(response.status).toBe(202)
    const { message_id: messageId } = await response.json()
    await worker.deliverDue()
    expect(
      target.received.map((entry) => [entry.headers['webhook-id'], entry.json.type, entry.json.data]),
    ).toEqual([[messageId, 'ping', { endpoint_id: endpoint.id, message: 'ping from lead capture' }]])
    expect(other.received).toHaveLength(0)
    expect(signedWith(endpoint.secret, target.received[0]!)).toBe(true)
  })

  test('a disabled endpoint cannot be pinged (409)', async () => {
    const { app, services, organization, token } = await setup()
    const endpoint = await createWebhookEndpoint(services, organization.id, { enabled: false })
    const response = await call(app, token, 'POST', `${BASE}/${endpoint.id}/test`)
    expect(response.status).toBe(409)
    expect((await response.json()).error).toBe('endpoint_disabled')
  })

  test('the response body is kept up to 2 KB', async () => {
    const { ctx, services, organization, worker } = await setup()
    const target = receiver(() => new Response('x'.repeat(5000), { status: 200 }))
    const endpoint = await createWebhookEndpoint(services, organization.id, { url: target.url })
    const messageId = await services.webhookEndpoints.ping(organization.id, endpoint.id)
    await worker.deliverDue()
    const [attempt] = await attemptsOf(ctx, endpoint.id, messageId)
    expect(attempt!.responseBody).toBe('x'.repeat(2048))
  })
})

describe('webhook delivery: retries', () => {
  test('the schedule: 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h, then failed; same webhook-id each time', async () => {
    const clock = new FakeClock(Date.UTC(2026, 6, 1))
    const { ctx, services, organization, worker } = await setup({ clock })
    const target = receiver(() => new Response('down', { status: 500 }))
    const endpoint = await createWebhookEndpoint(services, organization.id, { url: target.url })
    const messageId = await services.webhookEndpoints.ping(organization.id, endpoint.id)
    for (const [index, wait] of RETRY_SCHEDULE_MS.entries()) {
      await worker.deliverDue()
      expect(target.received).toHaveLength(index + 1)
      const delivery = await deliveryOf(ctx, endpoint.id, messageId)
      expect({
        status: delivery.status,
        attempts: delivery.attemptCount,
        next: delivery.nextAttemptAt.getTime(),
      }).toEqual({
        status: 'pending',
        attempts: index + 1,
        next: clock.now() + wait,
      })
      // Not a moment early.
      clock.advance(wait - 1)
      await worker.deliverDue()
      expect(target.received).toHaveLength(index + 1)
      clock.advance(1)
    }
    await worker.deliverDue()
    expect(target.received).toHaveLength(RETRY_SCHEDULE_MS.length + 1)
    expect((await deliveryOf(ctx, endpoint.id, messageId)).status).toBe('failed')
    expect(new Set(target.received.map((entry) => entry.headers['webhook-id']))).toEqual(new Set([messageId]))
    expect(target.received.every((entry) => signedWith(endpoint.secret, entry))).toBe(true)
    const attempts = await attemptsOf(ctx, endpoint.id, messageId)
    expect(attempts.map((attempt) => [attempt.responseStatus, attempt.error, attempt.responseBody])).toEqual(
      Array(8).fill([500, 'http_status', 'down']),
    )
  })

  const retryAfterCases: Array<[string, number, Record<string, string>, number]> = [
    ['429 with Retry-After: 60 → 60 s', 429, { 'retry-after': '60' }, 60_000],
    ['503 with Retry-After: 2 → 2 s (sooner than the schedule)', 503, { 'retry-after': '2' }, 2_000],
    ['429 asking for a day → capped at the next step (5 min)', 429, { 'retry-after': '86400' }, 5 * 60_000],
    ['503 with an HTTP date 90 s ahead → 90 s', 503, { 'retry-after': 'DATE+90' }, 90_000],
    ['500 with Retry-After: 60 → ignored (5 s)', 500, { 'retry-after': '60' }, 5_000],
    ['429 with an unreadable Retry-After → the schedule (5 s)', 429, { 'retry-after': 'soon' }, 5_000],
  ]
  for (const [label, status, headers, expected] of retryAfterCases) {
    test(`Retry-After: ${label}`, async () => {
      const clock = new FakeClock(Date.UTC(2026, 6, 1))
      const { ctx, services, organization, worker } = await setup({ clock })
      const date = new Date(clock.now() + 90_000).toUTCString()
      const target = receiver(
        () =>
          new Response('slow down', {
            status,
            headers: { 'retry-after': headers['retry-after']!.replace('DATE+90', date) },
          }),
      )
      const endpoint = await createWebhookEndpoint(services, organization.id, { url: target.url })
      const messageId = await services.webhookEndpoints.ping(organization.id, endpoint.id)
      await worker.deliverDue()
      expect((await deliveryOf(ctx, endpoint.id, messageId)).nextAttemptAt.getTime()).toBe(
        clock.now() + expected,
      )
    })
  }

  test('nextAttemptTime and parseRetryAfter, case by case', () => {
    const at = new Date(Date.UTC(2026, 0, 1))
    expect(
      RETRY_SCHEDULE_MS.map((_, index) => nextAttemptTime(index + 1, at, null)!.getTime() - at.getTime()),
    ).toEqual([...RETRY_SCHEDULE_MS])
    expect(nextAttemptTime(8, at, null)).toBeNull()
    expect(nextAttemptTime(7, at, 10 ** 9)!.getTime() - at.getTime()).toBe(10 * 3600_000)
    expect(parseRetryAfter(' 30 ', at)).toBe(30_000)
    expect(parseRetryAfter(new Date(at.getTime() - 5000).toUTCString(), at)).toBe(0)
    expect(parseRetryAfter(null, at)).toBeNull()
    expect(parseRetryAfter('-1', at)).toBeNull()
  })

  test('redirects are not followed: a 3xx is a failed attempt', async () => {
    const { ctx, services, organization, worker } = await setup()
    const elsewhere = receiver()
    const target = receiver(() => new Response(null, { status: 302, headers: { location: elsewhere.url } }))
    const endpoint = await createWebhookEndpoint(services, organization.id, { url: target.url })
    const messageId = await services.webhookEndpoints.ping(organization.id, endpoint.id)
    await worker.deliverDue()
    expect(elsewhere.received).toHaveLength(0)
    const [attempt] = await attemptsOf(ctx, endpoint.id, messageId)
    expect([attempt!.responseStatus, attempt!.error]).toEqual([302, 'redirect_not_followed'])
    expect((await deliveryOf(ctx, endpoint.id, messageId)).status).toBe('pending')
  })

  test('a receiver that does not answer in time: timeout', async () => {
    const { ctx, services, organization, worker } = await setup({ env: { WEBHOOK_TIMEOUT_MS: '300' } })
    const target = receiver(() => Bun.sleep(2000).then(() => new Response('late')))
    const endpoint = await createWebhookEndpoint(services, organization.id, { url: target.url })
    const messageId = await services.webhookEndpoints.ping(organization.id, endpoint.id)
    await worker.deliverDue()
    const [attempt] = await attemptsOf(ctx, endpoint.id, messageId)
    expect([attempt!.responseStatus, attempt!.error]).toEqual([null, 'timeout'])
    expect(attempt!.durationMs).toBeLessThan(1500)
  })

  test('nothing listening: connection_failed', async () => {
    const { ctx, services, organization, worker } = await setup()
    const endpoint = await createWebhookEndpoint(services, organization.id)
    const messageId = await services.webhookEndpoints.ping(organization.id, endpoint.id)
    await worker.deliverDue()
    const [attempt] = await attemptsOf(ctx, endpoint.id, messageId)
    expect([attempt!.responseStatus, attempt!.error]).toEqual([null, 'connection_failed'])
  })
})

describe('webhook delivery: disabling after 5 days of failures', () => {
  test('disabled, its pending messages failed, and endpoint.disabled sent to the other endpoints', async () => {
    const clock = new FakeClock(Date.UTC(2026, 6, 1))
    const { app, ctx, services, organization, token, worker } = await setup({ clock })
    const broken = receiver(() => new Response('no', { status: 500 }))
    const healthy = receiver()
    const failing = await createWebhookEndpoint(services, organization.id, { url: broken.url })
    const watcher = await createWebhookEndpoint(services, organization.id, {
      url: healthy.url,
      event_types: ['endpoint.disabled'],
    })
    const service = services.webhookEndpoints
    const firstFailure = clock.now()
    await service.ping(organization.id, failing.id)
    await worker.deliverDue()
    // Four days and 23 hours on, still failing: still enabled.
    clock.advance(5 * 24 * 3600_000 - 3600_000)
    await service.ping(organization.id, failing.id)
    await worker.deliverDue()
    expect(
      (await ctx.db.select().from(webhookEndpoints).where(eq(webhookEndpoints.id, failing.id)))[0]!.enabled,
    ).toBe(true)
    clock.advance(3600_000)
    const pending = await service.ping(organization.id, failing.id)
    await worker.deliverDue()

    const record = await (await call(app, token, 'GET', `${BASE}/${failing.id}`)).json()
    expect(record).toMatchObject({ enabled: false, disabled_reason: 'failing_for_5_days' })
    expect(record.stats.pending).toBe(0)
    expect((await deliveryOf(ctx, failing.id, pending)).status).toBe('failed')
    expect(healthy.received.map((entry) => entry.json)).toEqual([
      {
        type: 'endpoint.disabled',
        timestamp: new Date(clock.now()).toISOString(),
        data: {
          endpoint_id: failing.id,
          url: broken.url,
          reason: 'failing_for_5_days',
          failing_since: new Date(firstFailure).toISOString(),
        },
      },
    ])
    expect(signedWith(watcher.secret, healthy.received[0]!)).toBe(true)
    // Enabled again by a person: the streak starts over.
    const enabled = await call(app, token, 'PATCH', `${BASE}/${failing.id}`, { enabled: true })
    expect(await enabled.json()).toMatchObject({ enabled: true, disabled_reason: null })
  })

  test('a success in between ends the streak', async () => {
    const clock = new FakeClock(Date.UTC(2026, 6, 1))
    const { ctx, services, organization, worker } = await setup({ clock })
    let status = 500
    const target = receiver(() => new Response('', { status }))
    const endpoint = await createWebhookEndpoint(services, organization.id, { url: target.url })
    const service = services.webhookEndpoints
    await service.ping(organization.id, endpoint.id)
    await worker.deliverDue()
    clock.advance(3 * 24 * 3600_000)
    status = 200
    await service.ping(organization.id, endpoint.id)
    await worker.deliverDue()
    status = 500
    clock.advance(3 * 24 * 3600_000)
    await service.ping(organization.id, endpoint.id)
    await worker.deliverDue()
    const [row] = await ctx.db.select().from(webhookEndpoints).where(eq(webhookEndpoints.id, endpoint.id))
    expect({ enabled: row!.enabled, failingSince: row!.failingSince?.getTime() }).toEqual({
      enabled: true,
      failingSince: clock.now(),
    })
  })
})

describe('webhook delivery: rotation, replay, recover', () => {
  test('after a rotation both secrets sign for 24 h, then only the new one', async () => {
    const clock = new FakeClock(Date.now())
    const { app, services, organization, token, worker } = await setup({ clock })
    const target = receiver()
    const endpoint = await createWebhookEndpoint(services, organization.id, { url: target.url })
    const rotated = await (await call(app, token, 'POST', `${BASE}/${endpoint.id}/rotate-secret`)).json()
    const service = services.webhookEndpoints
    await service.ping(organization.id, endpoint.id)
    await worker.deliverDue()
    const [during] = target.received
    expect(during!.headers['webhook-signature']!.split(' ')).toHaveLength(2)
    // Either secret verifies with the library, timestamp included.
    for (const secret of [endpoint.secret, rotated.secret]) {
      expect(new Webhook(secret).verify(during!.body, during!.headers)).toMatchObject({ type: 'ping' })
    }
    clock.advance(24 * 3600_000 + 1000)
    await service.ping(organization.id, endpoint.id)
    await worker.deliverDue()
    const after = target.received[1]!
    expect(after.headers['webhook-signature']!.split(' ')).toHaveLength(1)
    expect([signedWith(rotated.secret, after), signedWith(endpoint.secret, after)]).toEqual([true, false])
  })

  test('retry sends a message again now, with the same webhook-id; an unknown message is a 404', async () => {
    const clock = new FakeClock(Date.UTC(2026, 6, 1))
    const { app, ctx, services, organization, token, worker } = await setup({ clock })
    const target = receiver()
    const endpoint = await createWebhookEndpoint(services, organization.id, { url: target.url })
    const messageId = await services.webhookEndpoints.ping(organization.id, endpoint.id)
    await worker.deliverDue()
    const retried = await call(app, token, 'POST', `${BASE}/${endpoint.id}/messages/${messageId}/retry`)
    expect(retried.status).toBe(202)
    expect(await retried.json()).toEqual({ message_id: messageId })
    await worker.deliverDue()
    expect(target.received.map((entry) => entry.headers['webhook-id'])).toEqual([messageId, messageId])
    expect((await deliveryOf(ctx, endpoint.id, messageId)).attemptCount).toBe(2)
    const missing = await call(
      app,
      token,
      'POST',
      `${BASE}/${endpoint.id}/messages/${crypto.randomUUID()}/retry`,
    )
    expect(missing.status).toBe(404)
    expect((await missing.json()).error).toBe('not_found')
    const malformed = await call(app, token, 'POST', `${BASE}/${endpoint.id}/messages/nope/retry`)
    expect(malformed.status).toBe(400)
    expect((await malformed.json()).error).toBe('validation_failed')
  })

  test('recover re-sends every failed message since the given time, and only those', async () => {
    const clock = new FakeClock(Date.UTC(2026, 6, 1))
    const { app, ctx, services, organization, token, worker } = await setup({ clock })
    let up = false
    const target = receiver(() => new Response('', { status: up ? 200 : 500 }))
    const endpoint = await createWebhookEndpoint(services, organization.id, { url: target.url })
    const service = services.webhookEndpoints
    const old = await service.ping(organization.id, endpoint.id)
    clock.advance(3600_000)
    const since = new Date(clock.now()).toISOString()
    const recent = [
      await service.ping(organization.id, endpoint.id),
      await service.ping(organization.id, endpoint.id),
    ]
    // Run every message through the whole schedule.
    for (let step = 0; step <= RETRY_SCHEDULE_MS.length; step++) {
      await worker.deliverDue()
      clock.advance(RETRY_SCHEDULE_MS[step] ?? 0)
    }
    for (const id of [old, ...recent]) expect((await deliveryOf(ctx, endpoint.id, id)).status).toBe('failed')
    up = true
    const before = target.received.length
    const response = await call(app, token, 'POST', `${BASE}/${endpoint.id}/recover`, { since })
    expect(response.status).toBe(200)
    expect(await response.json()).toEqual({ queued: 2 })
    await worker.deliverDue()
    expect(
      target.received
        .slice(before)
        .map((entry) => entry.headers['webhook-id'])
        .sort(),
    ).toEqual([...recent].sort())
    const failed = await (
      await call(app, token, 'GET', `${BASE}/${endpoint.id}/messages?status=failed`)
    ).json()
    expect(failed.data.map((message: { id: string }) => message.id)).toEqual([old])
    const pings = await (
      await call(app, token, 'GET', `${BASE}/${endpoint.id}/messages?event_type=ping&limit=1`)
    ).json()
    expect(pings.data).toHaveLength(1)
    expect(pings.next_cursor).toEqual(expect.any(String))
  })
})

// Rotating WEBHOOK_SECRETS_KEY (docs/webhooks.md "Key handling"): replicas restarted with a new key
// and the old one in WEBHOOK_SECRETS_PREVIOUS_KEYS keep signing with every endpoint's secret; the
// reseal command seals them again with the new key, after which the old key can go.
describe('webhook delivery: rotating WEBHOOK_SECRETS_KEY', () => {
  const OLD_KEY = randomBytes(32).toString('base64')
  const NEW_KEY = randomBytes(32).toString('base64')

  test('old key as previous: still signed with the same secret; reseal; then the new key alone', async () => {
    const before = await setup({ env: { WEBHOOK_SECRETS_KEY: OLD_KEY } })
    const target = receiver()
    const endpoint = await createWebhookEndpoint(before.services, before.organization.id, { url: target.url })
    // A rotation of the endpoint's own secret too, so a previous secret is sealed with the old key.
    const rotated = await (
      await call(before.app, before.token, 'POST', `${BASE}/${endpoint.id}/rotate-secret`)
    ).json()
    const sealedBefore = await sealedSecretsOf(before.ctx, endpoint.id)
    expect(new SecretBox(OLD_KEY).open(sealedBefore.current)).toBe(rotated.secret)
    expect(new SecretBox(OLD_KEY).open(sealedBefore.previous!)).toBe(endpoint.secret)

    // Replicas restarted with the new key: without the old one as previous, nothing opens.
    expect(() => new SecretBox(NEW_KEY).open(sealedBefore.current)).toThrow(/WEBHOOK_SECRETS_PREVIOUS_KEYS/)
    const during = await setup({
      env: {
        WEBHOOK_SECRETS_KEY: NEW_KEY,
        WEBHOOK_SECRETS_PREVIOUS_KEYS: `${randomBytes(32).toString('base64')},${OLD_KEY}`,
      },
    })
    expect((await call(during.app, before.token, 'POST', `${BASE}/${endpoint.id}/test`)).status).toBe(202)
    await during.worker.deliverDue()
    expect(target.received).toHaveLength(1)
    // Signed with both secrets (the rotation's 24 hours), each as it was before the key changed.
    expect(signedWith(rotated.secret, target.received[0]!)).toBe(true)
    expect(signedWith(endpoint.secret, target.received[0]!)).toBe(true)

    // One organization's endpoints (the test database holds other tests' too, sealed with the test key).
    const organization = ['--organization', before.organization.id]
    const resealed = await cliInProcess(during.ctx, 'webhooks', 'reseal', ...organization)
    expect(resealed).toEqual({
      code: 0,
      stdout: `${JSON.stringify({ endpoints: 1, resealed: 1, changed_meanwhile: 0, unreadable: [] })}\n`,
      stderr: '',
    })
    const sealedAfter = await sealedSecretsOf(during.ctx, endpoint.id)
    expect(new SecretBox(NEW_KEY).open(sealedAfter.current)).toBe(rotated.secret)
    expect(new SecretBox(NEW_KEY).open(sealedAfter.previous!)).toBe(endpoint.secret)
    expect(() => new SecretBox(OLD_KEY).open(sealedAfter.current)).toThrow()
    // Again: nothing left to reseal.
    expect(
      JSON.parse((await cliInProcess(during.ctx, 'webhooks', 'reseal', ...organization)).stdout),
    ).toEqual({
      endpoints: 1,
      resealed: 0,
      changed_meanwhile: 0,
      unreadable: [],
    })
    // A replica that lacks the key a secret was sealed with: the endpoint is named, the exit code 1.
    const lacking = await setup({ env: { WEBHOOK_SECRETS_KEY: OLD_KEY } })
    const refused = await cliInProcess(lacking.ctx, 'webhooks', 'reseal', ...organization)
    expect(refused.code).toBe(1)
    expect(JSON.parse(refused.stdout)).toEqual({
      endpoints: 1,
      resealed: 0,
      changed_meanwhile: 0,
      unreadable: [endpoint.id],
    })
    expect(refused.stderr).toContain('opens with none of the configured keys')

    // The old key removed: a replica with the new key alone still signs.
    const after = await setup({ env: { WEBHOOK_SECRETS_KEY: NEW_KEY } })
    expect((await call(after.app, before.token, 'POST', `${BASE}/${endpoint.id}/test`)).status).toBe(202)
    await after.worker.deliverDue()
    expect(target.received).toHaveLength(2)
    expect(signedWith(rotated.secret, target.received[1]!)).toBe(true)
    const [row] = await after.ctx.db
      .select({ updatedAt: webhookEndpoints.updatedAt })
      .from(webhookEndpoints)
      .where(eq(webhookEndpoints.id, endpoint.id))
    // The reseal changed nothing an API user sees.
    expect(row!.updatedAt.toISOString()).toBe(rotated.updated_at)
  })
})

async function sealedSecretsOf(ctx: AppContext, endpointId: string) {
  const [row] = await ctx.db
    .select({
      current: webhookEndpoints.secretCiphertext,
      previous: webhookEndpoints.previousSecretCiphertext,
    })
    .from(webhookEndpoints)
    .where(eq(webhookEndpoints.id, endpointId))
  return row!
}

describe('webhook delivery: what the worker keeps between deliveries', () => {
  const changes = [
    {
      label: 'a new URL',
      change: async (context: ChangeContext) => {
        const patched = await call(context.app, context.token, 'PATCH', `${BASE}/${context.endpointId}`, {
          url: context.second.url,
        })
        expect(patched.status).toBe(200)
      },
      check: (context: ChangeContext) => {
        expect(context.first.received).toHaveLength(1)
        expect(context.second.received).toHaveLength(1)
      },
    },
    {
      label: 'a rotated secret',
      change: async (context: ChangeContext) => {
        context.secrets.push(await rotate(context))
      },
      check: (context: ChangeContext) => {
        const [, after] = context.first.received
        expect(after!.headers['webhook-signature']!.split(' ')).toHaveLength(2)
        expect(context.secrets.map((secret) => signedWith(secret, after!))).toEqual([true, true])
      },
    },
    {
      // The clock stands still: both rotations carry the same updated_at, yet the second is seen.
      label: 'two rotations in the same millisecond',
      change: async (context: ChangeContext) => {
        context.secrets.push(await rotate(context))
        context.secrets.push(await rotate(context))
      },
      check: (context: ChangeContext) => {
        const [, after] = context.first.received
        expect(context.secrets.map((secret) => signedWith(secret, after!))).toEqual([false, true, true])
      },
    },
  ]
  interface ChangeContext {
    app: Awaited<ReturnType<typeof setup>>['app']
    token: string
    endpointId: string
    first: ReturnType<typeof receiver>
    second: ReturnType<typeof receiver>
    secrets: string[]
  }
  async function rotate(context: ChangeContext): Promise<string> {
    const response = await call(
      context.app,
      context.token,
      'POST',
      `${BASE}/${context.endpointId}/rotate-secret`,
    )
    expect(response.status).toBe(200)
    return ((await response.json()) as { secret: string }).secret
  }

  for (const { label, change, check } of changes) {
    test(`${label} reaches a worker of another replica that already holds the endpoint, at its next delivery`, async () => {
      const clock = new FakeClock(Date.now())
      const { app, services, organization, token } = await setup({ clock })
      // Another replica's worker: its own context, its own copy of the endpoint.
      const other = await makeTestApp({ clock })
      const worker = other.services.deliveryWorker
      const first = receiver()
      const second = receiver()
      const endpoint = await createWebhookEndpoint(services, organization.id, { url: first.url })
      const context: ChangeContext = {
        app,
        token,
        endpointId: endpoint.id,
        first,
        second,
        secrets: [endpoint.secret],
      }
      const service = services.webhookEndpoints
      await service.ping(organization.id, endpoint.id)
      await worker.deliverDue()
      expect(first.received).toHaveLength(1)
      await change(context)
      await service.ping(organization.id, endpoint.id)
      await worker.deliverDue()
      check(context)
    })
  }

  test('requests to a receiver reuse their connection (keep-alive)', async () => {
    const { services, organization, worker } = await setup()
    const target = receiver()
    const endpoint = await createWebhookEndpoint(services, organization.id, { url: target.url })
    const service = services.webhookEndpoints
    for (let index = 0; index < 5; index++) {
      await service.ping(organization.id, endpoint.id)
      await worker.deliverDue()
    }
    expect(target.received).toHaveLength(5)
    expect(new Set(target.received.map((entry) => entry.remotePort)).size).toBe(1)
  })
})

describe('webhook delivery: SSRF at delivery time and the in-flight cap', () => {
  test('an address that became private is refused at delivery (DNS rebinding), nothing is sent', async () => {
    // Saved while private networks were allowed; the worker runs without that permission.
    const target = receiver()
    const saved = await setup()
    const endpoint = await createWebhookEndpoint(saved.services, saved.organization.id, {
      url: target.url.replace('127.0.0.1', 'localhost'),
    })
    const strict = await makeTestApp({ env: { OUTBOUND_ALLOW_PRIVATE_NETWORKS: 'false' } })
    const messageId = await saved.services.webhookEndpoints.ping(saved.organization.id, endpoint.id)
    await strict.services.deliveryWorker.deliverDue()
    expect(target.received).toHaveLength(0)
    const [attempt] = await attemptsOf(saved.ctx, endpoint.id, messageId)
    expect(attempt!.error).toMatch(/^address_refused/)
    expect(attempt!.responseStatus).toBeNull()
  })

  // Saved while private networks were allowed, sent by a worker without that permission: refused
  // before any connection, whatever the way the address is written.
  const refusedAtDelivery = [
    ['IPv4 loopback', 'https://127.0.0.1:9/hook'],
    ['IPv6 loopback', 'https://[::1]:9/hook'],
    ['IPv4-mapped IPv6', 'https://[::ffff:127.0.0.1]:9/hook'],
    ['NAT64 of a private address', 'https://[64:ff9b::a00:1]:9/hook'],
    ['cloud metadata (IPv4)', 'https://169.254.169.254/latest/meta-data/'],
    ['cloud metadata (IPv6)', 'https://[fd00:ec2::254]/hook'],
    ['a name that resolves to 127.0.0.1', 'https://localhost:9/hook'],
  ] as const
  for (const [label, url] of refusedAtDelivery) {
    test(`refused at delivery: ${label}`, async () => {
      const saved = await setup()
      const endpoint = await createWebhookEndpoint(saved.services, saved.organization.id, { url })
      const strict = await makeTestApp({ env: { OUTBOUND_ALLOW_PRIVATE_NETWORKS: 'false' } })
      const messageId = await saved.services.webhookEndpoints.ping(saved.organization.id, endpoint.id)
      await strict.services.deliveryWorker.deliverDue()
      const [attempt] = await attemptsOf(saved.ctx, endpoint.id, messageId)
      expect(attempt!.error).toMatch(/^address_refused: the URL resolves to /)
      expect(attempt!.responseStatus).toBeNull()
    })
  }

  test('a hostname is resolved once, checked, and connected to by address; Host keeps the name', async () => {
    const { services, organization, worker } = await setup()
    const target = receiver()
    const endpoint = await createWebhookEndpoint(services, organization.id, {
      url: target.url.replace('127.0.0.1', 'localhost'),
    })
    await services.webhookEndpoints.ping(organization.id, endpoint.id)
    await worker.deliverDue()
    expect(target.received.map((entry) => entry.headers.host)).toEqual([`localhost:${target.port}`])
    expect(signedWith(endpoint.secret, target.received[0]!)).toBe(true)
  })

  test(`one slow receiver holds at most ${IN_FLIGHT_PER_ENDPOINT} requests; others are served meanwhile`, async () => {
    const { services, organization, worker } = await setup()
    let release: () => void = () => {}
    const gate = new Promise<void>((resolve) => {
      release = resolve
    })
    const slow = receiver(() => gate.then(() => new Response('ok')))
    const fast = receiver()
    const slowEndpoint = await createWebhookEndpoint(services, organization.id, { url: slow.url })
    const fastEndpoint = await createWebhookEndpoint(services, organization.id, { url: fast.url })
    const service = services.webhookEndpoints
    const slowCount = IN_FLIGHT_PER_ENDPOINT + 8
    for (let index = 0; index < slowCount; index++) await service.ping(organization.id, slowEndpoint.id)
    for (let index = 0; index < 5; index++) await service.ping(organization.id, fastEndpoint.id)
    const done = worker.deliverDue()
    const deadline = Date.now() + 5000
    while (fast.received.length < 5 && Date.now() < deadline) await Bun.sleep(20)
    expect(fast.received).toHaveLength(5)
    expect(slow.received).toHaveLength(IN_FLIGHT_PER_ENDPOINT)
    release()
    await done
    expect(slow.received).toHaveLength(slowCount)
    expect(slow.maxInFlight).toBe(IN_FLIGHT_PER_ENDPOINT)
  })
})
