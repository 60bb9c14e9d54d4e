import { describe, expect, setDefaultTimeout, test } from 'bun:test'
import { eq } from 'drizzle-orm'
import { webhookSources } from '../../src/db/schema'
import { FakeClock } from '../../src/lib/clock'
import { rollupDeliveryLogs } from '../../src/modules/delivery-logs/rollup'
import { runCommonRouteTests } from '../helpers/common-route-tests'
import {
  email,
  floodUntilLimited,
  get,
  post,
  postRaw,
  sendMix,
  setupSource,
} from '../helpers/delivery-traffic'
import { createOrganization, createSource } from '../helpers/factories'

// PGlite runs every statement in-process: a test that sends ~80 inbound requests needs more than 5 s.
setDefaultTimeout(60_000)

const HOUR = 3_600_000
const iso = (ms: number) => new Date(ms).toISOString()

type Setup = Awaited<ReturnType<typeof setupSource>>

async function health(setup: Pick<Setup, 'app' | 'token' | 'source'>) {
  const response = await get(setup.app, `/api/webhook/sources/${setup.source.id}/health`, setup.token)
  expect(response.status).toBe(200)
  expect(response.headers.get('content-type')).toContain('application/json')
  expect(response.headers.get('x-ratelimit-limit')).toBe('100')
  return response.json()
}

/** The health view must not change when the roll-up job folds the logs into hourly rows. */
async function healthAcrossRollup(setup: Setup & { clock: FakeClock }) {
  const live = await health(setup)
  const result = await rollupDeliveryLogs(setup.ctx)
  expect(result.ran).toBe(true)
  expect(await health(setup)).toEqual(live)
  return live
}

const zeroCounts = { requests: 0, created: 0, updated: 0, spam: 0, error: 0, rejected: 0 }

describe('GET /api/webhook/sources/{id}/health', () => {
  test('a source without traffic is idle: empty totals and 24 empty hourly buckets', async () => {
    const now = Date.UTC(2026, 2, 10, 9, 15, 30)
    const setup = await setupSource(new FakeClock(now))
    const body = await health(setup)
    const from = Date.UTC(2026, 2, 9, 10)
    expect(body).toEqual({
      source_id: setup.source.id,
      window: { from: iso(from), to: iso(now) },
      status: 'idle',
      totals: zeroCounts,
      rejections: [],
      success_rate: null,
      last_request_at: null,
      last_success_at: null,
      last_failure: null,
      latency_ms: { p50: null, p95: null, samples: 0 },
      hourly: Array.from({ length: 24 }, (_, index) => ({
        from: iso(from + index * HOUR),
        to: iso(from + (index + 1) * HOUR),
        ...zeroCounts,
      })),
      recent_problems: [],
    })
  })

  test('totals, rejections (429s summed by repeat_count) and hourly buckets match what was sent, across the 24-hour edge', async () => {
    const firstAt = Date.UTC(2026, 2, 10, 8, 59, 59)
    const clock = new FakeClock(firstAt)
    const setup = { ...(await setupSource(clock)), clock }
    expect((await post(setup.app, setup.apiKey, { email: email() })).status).toBe(200)
    clock.set(Date.UTC(2026, 2, 10, 9, 0, 0))
    const mix = await sendMix(setup.app, setup.apiKey, clock)
    const fillers = await floodUntilLimited(setup.services, setup.app, setup.apiKey, mix.length + 1, 35)
    const floodAt = clock.now()
    clock.set(Date.UTC(2026, 2, 10, 9, 30))

    const body = await healthAcrossRollup(setup)
    const expectedNineOClock = {
      requests: mix.length + fillers + 35,
      created: 1 + fillers,
      updated: 1,
      spam: 1,
      error: 1,
      rejected: 4 + 35,
    }
    expect(body.totals).toEqual({
      ...expectedNineOClock,
      requests: expectedNineOClock.requests + 1,
      created: expectedNineOClock.created + 1,
    })
    expect(body.rejections).toEqual([
      { reason: 'rate_limited', http_status: 429, count: 35 },
      { reason: 'invalid_json', http_status: 400, count: 1 },
      { reason: 'ip_not_allowed', http_status: 403, count: 1 },
      { reason: 'payload_too_large', http_status: 413, count: 1 },
      { reason: 'validation_failed', http_status: 400, count: 1 },
    ])
    const successes = body.totals.created + body.totals.updated + body.totals.spam
    expect(body.success_rate).toBe(Math.round((successes / body.totals.requests) * 10_000) / 10_000)
    expect(body.hourly).toHaveLength(24)
    expect(body.hourly[22]).toEqual({
      from: iso(Date.UTC(2026, 2, 10, 8)),
      to: iso(Date.UTC(2026, 2, 10, 9)),
      ...zeroCounts,
      requests: 1,
      created: 1,
    })
    expect(body.hourly[23]).toEqual({
      from: iso(Date.UTC(2026, 2, 10, 9)),
      to: iso(Date.UTC(2026, 2, 10, 10)),
      ...expectedNineOClock,
    })
    expect(body.hourly.slice(0, 22).every((bucket: { requests: number }) => bucket.requests === 0)).toBe(true)
    expect(body.last_request_at).toBe(iso(floodAt))
    expect(body.last_success_at).toBe(iso(floodAt))
    expect(body.last_failure).toEqual({ at: iso(floodAt), http_status: 429, reason: 'rate_limited' })
    expect(body.latency_ms.samples).toBe(body.totals.requests - 35)
    expect(body.latency_ms.p50).toBeGreaterThan(0)
    expect(body.latency_ms.p95).toBeGreaterThanOrEqual(body.latency_ms.p50)
    // The 35 429s are one aggregated row (two if the aggregator's 1 s timer fired mid-flood).
    expect(body.recent_problems.length).toBeGreaterThanOrEqual(7)
    expect(body.recent_problems.length).toBeLessThanOrEqual(8)
    expect(body.recent_problems[0]).toMatchObject({ http_status: 429, reason: 'rate_limited' })
    expect(body.recent_problems.map((entry: { reason: string }) => entry.reason).slice(-6)).toEqual([
      'payload_too_large',
      'ip_not_allowed',
      'validation_failed',
      'invalid_json',
      'missing_contact',
      'honeypot_filled:_gotcha',
    ])

    // 23 h 30 min later the 08:59:59 request has left the window; the 09:00 hour is the oldest bucket.
    clock.set(Date.UTC(2026, 2, 11, 8, 59, 59))
    const later = await healthAcrossRollup(setup)
    expect(later.window.from).toBe(iso(Date.UTC(2026, 2, 10, 9)))
    expect(later.totals).toEqual(expectedNineOClock)
    expect(later.hourly[0]).toMatchObject(expectedNineOClock)
    expect(later.hourly.slice(1).every((bucket: { requests: number }) => bucket.requests === 0)).toBe(true)

    // One second on, the window starts at 10:00: nothing left in it, so the source is idle.
    clock.set(Date.UTC(2026, 2, 11, 9, 0, 0))
    const empty = await healthAcrossRollup(setup)
    expect(empty).toMatchObject({ status: 'idle', totals: zeroCounts, success_rate: null, rejections: [] })
    expect(empty.last_request_at).toBe(iso(floodAt))
    expect(empty.recent_problems).toEqual(body.recent_problems)
  })

  test('at most the 10 latest problem deliveries, newest first; successes are never listed', async () => {
    const clock = new FakeClock(Date.UTC(2026, 2, 10, 12))
    const setup = await setupSource(clock)
    for (let index = 0; index < 12; index++) {
      expect((await postRaw(setup.app, setup.apiKey, `{broken ${index}`)).status).toBe(400)
      clock.advance(1000)
      expect((await post(setup.app, setup.apiKey, { email: email() })).status).toBe(200)
      clock.advance(1000)
    }
    const body = await health(setup)
    expect(body.recent_problems).toHaveLength(10)
    expect(body.recent_problems.every((entry: { reason: string }) => entry.reason === 'invalid_json')).toBe(
      true,
    )
    const times = body.recent_problems.map((entry: { received_at: string }) => entry.received_at)
    expect(times).toEqual([...times].sort().reverse())
    expect(times[0]).toBe(iso(Date.UTC(2026, 2, 10, 12) + 22_000))
  })

  test('status moves through idle, healthy, degraded, failing and disabled as documented', async () => {
    const clock = new FakeClock(Date.UTC(2026, 2, 10, 12))
    const setup = { ...(await setupSource(clock)), clock }
    const ok = async (count: number) => {
      for (let index = 0; index < count; index++) {
        expect((await post(setup.app, setup.apiKey, { email: email() })).status).toBe(200)
        clock.advance(500)
      }
    }
    const bad = async (count: number) => {
      for (let index = 0; index < count; index++) {
        expect((await postRaw(setup.app, setup.apiKey, 'nope')).status).toBe(400)
        clock.advance(500)
      }
    }
    const status = async () => (await health(setup)).status

    expect(await status()).toBe('idle')
    await ok(20)
    expect(await status()).toBe('healthy')
    await bad(1) // 20 of 21 succeeded (95.2%), but the latest request failed
    expect(await status()).toBe('degraded')
    await ok(1) // 21 of 22 (95.5%) and the latest succeeded
    expect(await status()).toBe('healthy')
    await bad(4) // 21 of 26: under 95%
    expect(await status()).toBe('degraded')
    await bad(1) // the latest 5 all failed
    expect(await status()).toBe('failing')
    await ok(1) // 5 of the latest 20 failed: not failing any more, but 22 of 28 is under 95%
    expect(await status()).toBe('degraded')
    await rollupDeliveryLogs(setup.ctx, clock.now() + 10 * 60_000)
    expect(await status()).toBe('degraded')
    // 28 requests so far this minute: 32 more fill the key's limit, then a flood of 429s (one row).
    await floodUntilLimited(setup.services, setup.app, setup.apiKey, 28, 12)
    expect(await status()).toBe('failing')
    await setup.ctx.db
      .update(webhookSources)
      .set({ enabled: false })
      .where(eq(webhookSources.id, setup.source.id))
    expect(await status()).toBe('disabled')
  })

  test('more than half of the latest 20 requests failing is failing, even when the latest succeeded', async () => {
    const clock = new FakeClock(Date.UTC(2026, 2, 10, 15))
    const setup = await setupSource(clock)
    for (let index = 0; index < 11; index++) {
      expect((await postRaw(setup.app, setup.apiKey, 'nope')).status).toBe(400)
      clock.advance(500)
      expect((await post(setup.app, setup.apiKey, { email: email() })).status).toBe(200)
      clock.advance(500)
    }
    // Latest 20: 10 failed, 10 succeeded → not more than half.
    expect((await health(setup)).status).toBe('degraded')
    // Three failures then a success: newest first ok, f, f, f, then 16 alternating → 11 of 20 failed.
    for (let index = 0; index < 3; index++) {
      expect((await postRaw(setup.app, setup.apiKey, 'nope')).status).toBe(400)
      clock.advance(500)
    }
    expect((await post(setup.app, setup.apiKey, { email: email() })).status).toBe(200)
    expect((await health(setup)).status).toBe('failing')
  })

  test('404 for another organization’s source and an unknown id', async () => {
    const setup = await setupSource(new FakeClock(Date.UTC(2026, 2, 10, 12)))
    const other = await createOrganization(setup.ctx)
    const { source: foreign } = await createSource(setup.ctx, other.id)
    for (const id of [foreign.id, crypto.randomUUID()]) {
      const response = await get(setup.app, `/api/webhook/sources/${id}/health`, setup.token)
      expect(response.status).toBe(404)
      expect(await response.json()).toEqual({
        error: 'source_not_found',
        message: 'source not found',
        request_id: response.headers.get('x-request-id'),
      })
    }
  })
})

runCommonRouteTests({
  method: 'GET',
  path: async (fixture) =>
    `/api/webhook/sources/${(await createSource(fixture.ctx, fixture.organizationId)).source.id}/health`,
  permission: 'settings.integrations',
  feature: 'integrations',
})
