import { afterEach, beforeAll, describe, expect, test } from 'bun:test'
import { FakeClock } from '../../src/lib/clock'
import { rollupDeliveryLogs } from '../../src/modules/delivery-logs/rollup'
import { announceSourceStatusChanges } from '../../src/modules/webhook-endpoints/events'
import { createSignedInUser, createSource, createWebhookEndpoint } from '../helpers/factories'
import { makeTestApp, testDatabase } from '../helpers/test-app'
import { startReceiver } from '../helpers/webhook-receiver'

beforeAll(async () => {
  await testDatabase()
}, 60_000)

const receivers: Array<ReturnType<typeof startReceiver>> = []
afterEach(() => {
  for (const receiver of receivers.splice(0)) receiver.stop()
})

const MINUTE = 60_000
const HOUR = 60 * MINUTE

type Log = { ageMs: number; outcome: string; status?: number; repeat?: number }

/**
 * Delivery-log histories that put each status rule at its edge: counts weighted by repeat_count,
 * rows older than the window among the newest 20, rolled-up hours plus live rows, a disabled source.
 */
const HISTORIES: Record<string, { logs: Log[]; enabled?: boolean }> = {
  idle: { logs: [] },
  'idle, only logs before the window': { logs: [{ ageMs: 30 * HOUR, outcome: 'rejected', status: 400 }] },
  healthy: {
    logs: Array.from({ length: 30 }, (_, index) => ({ ageMs: index * MINUTE, outcome: 'created' })),
  },
  'degraded: latest failed': {
    logs: [
      { ageMs: 0, outcome: 'error' },
      ...Array.from({ length: 30 }, (_, i) => ({ ageMs: (i + 1) * MINUTE, outcome: 'created' })),
    ],
  },
  'degraded: success rate 94%': {
    logs: [
      ...Array.from({ length: 6 }, (_, i) => ({
        ageMs: 3 * HOUR + i * MINUTE,
        outcome: 'rejected',
        status: 422,
      })),
      ...Array.from({ length: 94 }, (_, i) => ({ ageMs: 2 * HOUR - i * MINUTE, outcome: 'updated' })),
    ],
  },
  'healthy: success rate 95%': {
    logs: [
      ...Array.from({ length: 5 }, (_, i) => ({
        ageMs: 3 * HOUR + i * MINUTE,
        outcome: 'rejected',
        status: 422,
      })),
      ...Array.from({ length: 95 }, (_, i) => ({ ageMs: 2 * HOUR - i * MINUTE, outcome: 'spam' })),
    ],
  },
  'failing: a 429 row of 5 requests is the latest 5': {
    logs: [
      { ageMs: 0, outcome: 'rejected', status: 429, repeat: 5 },
      ...Array.from({ length: 40 }, (_, i) => ({ ageMs: (i + 1) * MINUTE, outcome: 'created' })),
    ],
  },
  'degraded: 4 latest failed, then successes': {
    logs: [
      ...Array.from({ length: 4 }, (_, i) => ({ ageMs: i * MINUTE, outcome: 'error' })),
      ...Array.from({ length: 100 }, (_, i) => ({ ageMs: (i + 10) * MINUTE, outcome: 'created' })),
    ],
  },
  'failing: 11 of the latest 20 failed': {
    logs: Array.from({ length: 20 }, (_, i) =>
      i % 2 === 0 || i === 19
        ? { ageMs: i * MINUTE, outcome: 'rejected', status: 400 }
        : { ageMs: i * MINUTE, outcome: 'created' },
    ),
  },
  'failing: 3 of 5 in the window, the rest before it': {
    logs: [
      { ageMs: MINUTE, outcome: 'created' },
      { ageMs: 2 * MINUTE, outcome: 'error' },
      { ageMs: 3 * MINUTE, outcome: 'created' },
      { ageMs: 4 * MINUTE, outcome: 'error' },
      { ageMs: 5 * MINUTE, outcome: 'error' },
      ...Array.from({ length: 10 }, (_, i) => ({ ageMs: 30 * HOUR + i * MINUTE, outcome: 'created' })),
    ],
  },
  // 12 successes and 8 of the flood's 50 make the latest 20: 8 failures is not more than half.
  'healthy: a flood row cut at 20 requests': {
    logs: [
      ...Array.from({ length: 12 }, (_, i) => ({ ageMs: (i + 1) * MINUTE, outcome: 'created' })),
      { ageMs: 13 * MINUTE, outcome: 'rejected', status: 429, repeat: 50 },
      ...Array.from({ length: 30 }, (_, i) => ({
        ageMs: (i + 14) * MINUTE,
        outcome: 'created',
        repeat: 100,
      })),
    ],
  },
  disabled: { logs: [{ ageMs: 0, outcome: 'created' }], enabled: false },
}

async function setup() {
  const clock = new FakeClock(Date.UTC(2026, 8, 1, 12, 30))
  const { ctx, services } = await makeTestApp({ clock })
  const { organization } = await createSignedInUser(ctx)
  return { ctx, services, clock, organization }
}

async function insertLogs(
  ctx: Awaited<ReturnType<typeof setup>>['ctx'],
  organizationId: string,
  sourceId: string,
  logs: Log[],
  now: number,
) {
  for (const log of logs) {
    await ctx.database.query(
      `insert into delivery_logs (id, source_id, organization_id, received_at, method, http_status, outcome, duration_ms, repeat_count)
       values (gen_random_uuid(), $1, $2, $3, 'POST', $4, $5, 3, $6)`,
      [
        sourceId,
        organizationId,
        new Date(now - log.ageMs).toISOString(),
        log.status ?? 200,
        log.outcome,
        log.repeat ?? 1,
      ],
    )
  }
}

describe('source statuses, many at once', () => {
  test('statuses() gives every source the status health() gives it, with or without a roll-up', async () => {
    const { ctx, services, clock, organization } = await setup()
    const sources: Array<{ name: string; id: string; expected: string }> = []
    for (const [name, history] of Object.entries(HISTORIES)) {
      const { source } = await createSource(ctx, organization.id, { name, enabled: history.enabled ?? true })
      await insertLogs(ctx, organization.id, source.id, history.logs, clock.now())
      sources.push({ name, id: source.id, expected: name.split(/[:,]/)[0]! })
    }
    const health = services.deliveryLogs
    const compare = async () => {
      const statuses = await health.statuses(sources.map((source) => source.id))
      const expected = Object.fromEntries(sources.map((source) => [source.name, source.expected]))
      const viaHealth: Record<string, string> = {}
      const viaBatch: Record<string, string | undefined> = {}
      for (const source of sources) {
        viaHealth[source.name] = (await health.health(organization.id, source.id)).status
        viaBatch[source.name] = statuses.get(source.id)
      }
      expect(viaHealth).toEqual(expected)
      expect(viaBatch).toEqual(expected)
    }
    await compare()
    // Half the window rolled up (watermarks 2 minutes back), the rest live: the same statuses.
    const rolled = await rollupDeliveryLogs(ctx)
    expect(rolled.ran).toBe(true)
    expect(rolled.sources).toBeGreaterThan(5)
    await compare()
    clock.advance(20 * MINUTE)
    await rollupDeliveryLogs(ctx)
    await compare()
  })

  test('a source deleted (or never there) is missing from the map; no id is an empty map', async () => {
    const { ctx, services, organization } = await setup()
    const { source } = await createSource(ctx, organization.id)
    const statuses = await services.deliveryLogs.statuses([source.id, crypto.randomUUID()])
    expect([...statuses]).toEqual([[source.id, 'idle']])
    expect((await services.deliveryLogs.statuses([])).size).toBe(0)
  })
})

describe('source.status_changed with many sources, checked in batches', () => {
  test('every transition is announced once, in every batch, and the first statuses are silent', async () => {
    const { ctx, services, clock, organization } = await setup()
    const receiver = startReceiver()
    receivers.push(receiver)
    await createWebhookEndpoint(services, organization.id, {
      url: receiver.url,
      event_types: ['source.status_changed'],
    })
    const sources = []
    for (let index = 0; index < 23; index++) {
      const { source } = await createSource(ctx, organization.id, { name: `source ${index}` })
      await insertLogs(ctx, organization.id, source.id, [{ ageMs: HOUR, outcome: 'created' }], clock.now())
      sources.push(source)
    }
    const run = () =>
      announceSourceStatusChanges(
        ctx,
        { health: services.deliveryLogs, service: services.webhookEndpoints },
        { batchSize: 4 },
      )
    expect(await run()).toBe(0)
    // Every third source fails 5 times (healthy → failing), every fifth is disabled: 11 moves
    // (sources 0 and 15 are both; disabled wins), spread over all six batches.
    const failing = sources.filter((_, index) => index % 3 === 0)
    const disabled = sources.filter((_, index) => index % 5 === 0)
    for (const source of failing) {
      const fails = Array.from({ length: 5 }, (_, i) => ({ ageMs: i * 1000, outcome: 'error' }))
      await insertLogs(ctx, organization.id, source.id, fails, clock.now())
    }
    for (const source of disabled) {
      await ctx.database.query('update webhook_sources set enabled = false where id = $1', [source.id])
    }
    const expected = new Map<string, string>()
    for (const source of failing) expected.set(source.id, 'failing')
    for (const source of disabled) expected.set(source.id, 'disabled')
    expect(await run()).toBe(expected.size)
    expect(await run()).toBe(0)
    await services.deliveryWorker.deliverDue()
    const events = receiver.received.map((entry) => entry.json)
    expect(events.map((event) => event.type)).toEqual(Array(expected.size).fill('source.status_changed'))
    const got = new Map(
      events.map((event) => {
        const data = event.data as {
          source: { id: string }
          previous_status: string
          status: string
          health: { status: string }
        }
        expect(data.previous_status).toBe('healthy')
        expect(data.health.status).toBe(data.status)
        return [data.source.id, data.status]
      }),
    )
    expect(got).toEqual(expected)
  })
})
