import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Redis from 'ioredis'
import {
  cleanupAll,
  createTestDatabase,
  openLoop,
  percentile,
  postLead,
  type RedisServer,
  type Replica,
  redisServer,
  redisServerAvailable,
  seedThroughApi,
  spawnReplica,
  uniqueEmail,
  waitUntil,
} from './support'

const RATE = 150
const HANG_MS = 10_000
/**
 * The defect: every request waits for ioredis' 250 ms command timeout while Redis hangs, so the
 * median is ≥ 250 ms and nearly every request takes ≥ 250 ms (1,464 of 1,470 in the report). With
 * the breaker only the requests caught before it trips (40 ms on a quiet link, up to 200 ms after
 * slow answers) wait. On a shared 2-core machine CPU contention alone produces 100–500 ms stalls in
 * healthy runs, so the bounds are the median, the share of requests at the timeout, and the tail
 * relative to a healthy run of the same length measured just before: each separates the two cases
 * by well over 100 ms. The absolute p99 target (≤ 20 ms) is measured by `bun run bench:redis-stall`.
 */
const MEDIAN_BOUND_MS = 50
const SLOW_SHARE_BOUND = 0.05
// On a loaded machine the threshold can sit at its 200 ms ceiling, so the ~1-2% of requests caught
// in the first stalled batch may wait that long: the tail bound is on p95, the share at the 250 ms
// timeout bounds the rest.
const P95_EXCESS_BOUND_MS = 100

interface Readiness {
  rate_limiter: { kind: string; status: 'up' | 'degraded' }
}

/**
 * A Redis that hangs (SIGSTOP: connections stay open, nothing answers) must not slow requests.
 * The inbound route never waits for Redis (its per-key limit is in PostgreSQL, its platform cap
 * counted by the replica and sent to Redis without waiting: docs/architecture.md "One round trip");
 * the limiter of the management API, after its first timeout, answers every check from the
 * in-process limiter, Redis is probed in the background, and shared limits resume within 2 s of its
 * recovery. Runs on PostgreSQL when
 * DATABASE_URL is set, on an embedded DATA_DIR otherwise; always on a redis-server of its own.
 */
describe.skipIf(!redisServerAvailable())('Redis hangs for 10 s under 150 requests/s', () => {
  let redis: RedisServer
  let replica: Replica
  let apiKeys: string[]
  let dataRoot: string | undefined

  beforeAll(async () => {
    redis = redisServer()
    await redis.start()
    const env: Record<string, string | undefined> = { REDIS_URL: redis.url, SHUTDOWN_DELAY_MS: '0' }
    if (process.env.DATABASE_URL) env.DATABASE_URL = (await createTestDatabase()).url
    else {
      dataRoot = mkdtempSync(join(tmpdir(), 'lc-redis-stall-'))
      env.DATA_DIR = join(dataRoot, 'data')
    }
    replica = await spawnReplica({ env })
    // 60 sources: 150/s for 21 s is about 53 requests per source, under the 60/min per-key limit.
    ;({ apiKeys } = await seedThroughApi(replica.url, 60))
  }, 120_000)

  afterAll(async () => {
    await cleanupAll()
    if (dataRoot) rmSync(dataRoot, { recursive: true, force: true })
  }, 30_000)

  test('no request waits for the hung Redis (median, share at the timeout, p99 against a healthy run); shared limits back within 2 s of SIGCONT', async () => {
    const readiness = async () =>
      (await (
        await fetch(`${replica.url}/readyz`, { signal: AbortSignal.timeout(3000) })
      ).json()) as Readiness
    expect((await readiness()).rate_limiter).toEqual({ kind: 'redis', status: 'up' })
    const send = (label: string, offset: number) => (index: number) =>
      postLead(
        replica.url,
        apiKeys[(index + offset) % apiKeys.length]!,
        { email: uniqueEmail(label) },
        10_000,
      )
    // Warm-up (source cache, connections), then a healthy run of the same length as the hang.
    await openLoop(RATE, 1000, send('warm', 0))
    const healthy = await openLoop(RATE, HANG_MS, send('healthy', 3))
    expect(healthy.filter((sent) => sent.status !== 200).map((sent) => sent.failed ?? sent.status)).toEqual(
      [],
    )

    redis.signal('SIGSTOP')
    let hung: Awaited<ReturnType<typeof postLead>>[]
    try {
      // A management request (its limiter call) meets the hang too and opens the circuit.
      const management = fetch(`${replica.url}/api/webhook/sources`, { signal: AbortSignal.timeout(5000) })
      hung = await openLoop(RATE, HANG_MS, send('hung', 7))
      expect((await management).status).toBe(401)
      expect((await readiness()).rate_limiter.status).toBe('degraded')
    } finally {
      redis.signal('SIGCONT')
    }
    const continuedAt = performance.now()
    const summary = (sent: Awaited<ReturnType<typeof postLead>>[]) => {
      const latencies = sent.map((one) => one.ms)
      return {
        requests: sent.length,
        p50_ms: Math.round(percentile(latencies, 50) * 10) / 10,
        p95_ms: Math.round(percentile(latencies, 95) * 10) / 10,
        p99_ms: Math.round(percentile(latencies, 99) * 10) / 10,
        max_ms: Math.round(Math.max(...latencies)),
        at_least_250_ms: latencies.filter((ms) => ms >= 250).length,
      }
    }
    const before = summary(healthy)
    const during = summary(hung)
    console.log(`${RATE} req/s for ${HANG_MS / 1000} s: healthy ${JSON.stringify(before)}`)
    console.log(`${RATE} req/s for ${HANG_MS / 1000} s: redis SIGSTOPped ${JSON.stringify(during)}`)
    expect(hung.filter((sent) => sent.status !== 200).map((sent) => sent.failed ?? sent.status)).toEqual([])
    expect(during.p50_ms).toBeLessThanOrEqual(MEDIAN_BOUND_MS)
    expect(during.at_least_250_ms / during.requests).toBeLessThanOrEqual(SLOW_SHARE_BOUND)
    expect(during.p95_ms).toBeLessThanOrEqual(before.p95_ms + P95_EXCESS_BOUND_MS)

    // Recovery: the background probe closes the circuit within 2 s of SIGCONT…
    await waitUntil(async () => (await readiness()).rate_limiter.status === 'up', 5000, 'limiter up')
    const recoveredMs = performance.now() - continuedAt
    console.log(`shared limits resumed ${Math.round(recoveredMs)} ms after SIGCONT`)
    expect(recoveredMs).toBeLessThanOrEqual(2000)
    // …management requests are counted in Redis again (a key for the new user's bucket appears), the
    // platform cap's counts reach it again, and no per-key bucket is ever kept there.
    const client = new Redis(redis.url, { lazyConnect: true, maxRetriesPerRequest: 1 })
    const platformTotal = async () => {
      let total = 0
      for (const key of await client.keys('rl:platform:all:*')) total += Number(await client.get(key))
      return total
    }
    try {
      await client.connect()
      const before = new Set(await client.keys('rl:management:*'))
      const fresh = (await seedThroughApi(replica.url, 1)).apiKeys[0]!
      expect((await client.keys('rl:management:*')).filter((key) => !before.has(key)).length).toBeGreaterThan(
        0,
      )
      const counted = await platformTotal()
      expect((await postLead(replica.url, fresh, { email: uniqueEmail('after') })).status).toBe(200)
      await waitUntil(async () => (await platformTotal()) > counted, 2000, 'platform count in Redis')
      expect(await client.keys('rl:inbound:*')).toEqual([])
    } finally {
      client.disconnect()
    }
  }, 120_000)
})
