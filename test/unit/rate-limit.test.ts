import { afterEach, describe, expect, test } from 'bun:test'
import { FakeClock } from '../../src/lib/clock'
import { createMemoryLogger } from '../../src/lib/logger'
import {
  MAX_TRIP_MS,
  MemoryRateLimiter,
  MIN_TRIP_MS,
  type RateLimiter,
  type RedisConnection,
  RedisRateLimiter,
  tripThresholdMs,
} from '../../src/lib/rate-limit'
import { REDIS_DRIVERS, type RedisDriver, redisConnectionsOfFile } from '../helpers/redis'

const redisUrl = process.env.REDIS_URL
const openConnection = redisConnectionsOfFile()

function redisLimiter(connection: RedisConnection): RedisRateLimiter {
  return new RedisRateLimiter(
    connection,
    new MemoryRateLimiter(),
    createMemoryLogger(),
    `rl:test:${crypto.randomUUID()}:`,
  )
}

// The Redis variant waits for the connection first: commands sent before it is ready would fail
// over to the in-process fallback, and the test would not be testing Redis at all.
async function readyRedisLimiter(url: string, driver: RedisDriver): Promise<RateLimiter> {
  const connection = openConnection(url, driver)
  const limiter = redisLimiter(connection)
  await connection.waitReady(5000)
  expect(connection.ready).toBe(true)
  return limiter
}

const implementations: Array<[string, () => RateLimiter | Promise<RateLimiter>]> = [
  ['in-process', () => new MemoryRateLimiter()],
]
if (redisUrl) {
  for (const driver of REDIS_DRIVERS)
    implementations.push([`redis, ${driver}`, () => readyRedisLimiter(redisUrl, driver)])
}

afterEach(async () => {
  // Every Redis-backed check must have been answered by Redis, not by the fallback.
  for (const limiter of usedLimiters.splice(0)) expect(limiter.state()).toBe('up')
})
const usedLimiters: RateLimiter[] = []

const perKey = (key = 'k') => ({ bucket: 'inbound', key, limit: 60, windowMs: 60_000 })

describe.each(implementations)('sliding window (%s)', (name, makeLimiter) => {
  const build = async () => {
    const limiter = await makeLimiter()
    if (name.startsWith('redis')) usedLimiters.push(limiter)
    return limiter
  }
  test('the 61st request of 60 inside the window is refused', async () => {
    const limiter = await build()
    const clock = new FakeClock()
    for (let index = 0; index < 60; index++) {
      const result = await limiter.check([perKey()], clock.now())
      expect(result.allowed).toBe(true)
      expect(result.decisive.remaining).toBe(59 - index)
      clock.advance(500)
    }
    const refused = await limiter.check([perKey()], clock.now())
    expect(refused.allowed).toBe(false)
    expect(refused.decisive).toMatchObject({ bucket: 'inbound', limit: 60, remaining: 0, allowed: false })
    // The oldest request was 30 s ago: a slot frees in 30 s.
    expect(refused.decisive.resetMs).toBe(30_000)
  })

  test('a slot is freed exactly when the oldest request leaves the window', async () => {
    const limiter = await build()
    const clock = new FakeClock()
    const start = clock.now()
    await limiter.check([perKey()], start)
    clock.advance(10_000)
    for (let index = 0; index < 59; index++) await limiter.check([perKey()], clock.now())
    expect((await limiter.check([perKey()], clock.now())).allowed).toBe(false)
    clock.set(start + 59_999)
    expect((await limiter.check([perKey()], clock.now())).allowed).toBe(false)
    clock.set(start + 60_000)
    const freed = await limiter.check([perKey()], clock.now())
    expect(freed.allowed).toBe(true)
    expect(freed.decisive.remaining).toBe(0)
    // Only one slot was freed: the other 59 are still inside the window.
    expect((await limiter.check([perKey()], clock.now())).allowed).toBe(false)
  })

  test('concurrent checks (sent to Redis together) keep the exact semantics: 60 of 100 pass', async () => {
    const limiter = await build()
    const clock = new FakeClock()
    const results = await Promise.all(
      Array.from({ length: 100 }, () => limiter.check([perKey()], clock.now())),
    )
    expect(results.filter((result) => result.allowed)).toHaveLength(60)
    // In arrival order: the first 60 pass, each seeing one slot fewer.
    expect(results.slice(0, 60).map((result) => result.decisive.remaining)).toEqual(
      Array.from({ length: 60 }, (_, index) => 59 - index),
    )
    expect(results.slice(60).every((result) => !result.allowed && result.decisive.remaining === 0)).toBe(true)
  })

  test('concurrent checks on a window counter keep the exact semantics: 30 of the last 50 pass', async () => {
    const limiter = await build()
    // At the start of a window: nothing of a previous one is weighted in.
    const clock = new FakeClock(Date.UTC(2026, 0, 1, 0, 0, 0))
    const rule = { bucket: 'platform', key: 'all', limit: 10_030, windowMs: 60_000 }
    const filled = await Promise.all(Array.from({ length: 10_000 }, () => limiter.check([rule], clock.now())))
    expect(filled.every((result) => result.allowed)).toBe(true)
    expect(filled[9_999]!.decisive.remaining).toBe(30)
    const results = await Promise.all(Array.from({ length: 50 }, () => limiter.check([rule], clock.now())))
    expect(results.slice(0, 30).map((result) => result.decisive.remaining)).toEqual(
      Array.from({ length: 30 }, (_, index) => 29 - index),
    )
    expect(results.slice(30).every((result) => !result.allowed && result.decisive.remaining === 0)).toBe(true)
    // Refused requests were not counted: half-way into the next window half of 10,030 still weighs.
    clock.advance(90_000)
    expect((await limiter.check([rule], clock.now())).decisive.remaining).toBe(10_030 - 5_015 - 1)
  })

  test('refused requests are not counted', async () => {
    const limiter = await build()
    const clock = new FakeClock()
    for (let index = 0; index < 60; index++) await limiter.check([perKey()], clock.now())
    for (let index = 0; index < 100; index++) await limiter.check([perKey()], clock.now())
    clock.advance(60_000)
    const result = await limiter.check([perKey()], clock.now())
    expect(result.allowed).toBe(true)
    expect(result.decisive.remaining).toBe(59)
  })

  test('keys are independent', async () => {
    const limiter = await build()
    const clock = new FakeClock()
    for (let index = 0; index < 60; index++) await limiter.check([perKey('a')], clock.now())
    expect((await limiter.check([perKey('a')], clock.now())).allowed).toBe(false)
    expect((await limiter.check([perKey('b')], clock.now())).allowed).toBe(true)
  })

  test('several buckets: refused by the tightest, recorded in none when refused', async () => {
    const limiter = await build()
    const clock = new FakeClock()
    const wide = { bucket: 'platform', key: 'all', limit: 1000, windowMs: 60_000 }
    const narrow = { bucket: 'login', key: 'ip', limit: 2, windowMs: 60_000 }
    expect((await limiter.check([wide, narrow], clock.now())).decisive.bucket).toBe('login')
    await limiter.check([wide, narrow], clock.now())
    const refused = await limiter.check([wide, narrow], clock.now())
    expect(refused.allowed).toBe(false)
    expect(refused.decisive.bucket).toBe('login')
    const wideOnly = await limiter.check([wide], clock.now())
    // Two recorded in the wide bucket by the allowed requests, none by the refused one, one now.
    expect(wideOnly.decisive.remaining).toBe(997)
  })

  test('large limits use the sliding-window counter', async () => {
    const limiter = await build()
    const clock = new FakeClock(Date.UTC(2026, 0, 1, 0, 0, 0))
    const rule = { bucket: 'platform', key: 'all', limit: 20_000, windowMs: 60_000 }
    for (let index = 0; index < 100; index++) await limiter.check([rule], clock.now())
    expect((await limiter.check([rule], clock.now())).decisive.remaining).toBe(20_000 - 101)
    // Half-way into the next window, half of the previous window (floor(101 / 2) = 50) still counts.
    clock.advance(90_000)
    expect((await limiter.check([rule], clock.now())).decisive.remaining).toBe(20_000 - 50 - 1)
  })
})

describe.each(REDIS_DRIVERS)('redis outage (%s)', (driver) => {
  test('fails open to the in-process limiter within a second, and reports degraded', async () => {
    // Nothing listens on this port: every command fails immediately (no offline queue).
    const limiter = redisLimiter(openConnection('redis://127.0.0.1:1', driver))
    const clock = new FakeClock()
    const started = performance.now()
    const results = []
    for (let index = 0; index < 61; index++) results.push(await limiter.check([perKey()], clock.now()))
    expect(performance.now() - started).toBeLessThan(1000)
    expect(results.slice(0, 60).every((result) => result.allowed)).toBe(true)
    // The fallback keeps the same semantics per replica.
    expect(results[60]!.allowed).toBe(false)
    expect(limiter.state()).toBe('degraded')
  })
})

describe('circuit breaker threshold', () => {
  // The slowest recent answer → how long a batch may wait before the circuit opens.
  const cases: Array<[slowestAnswerMs: number, thresholdMs: number]> = [
    [0, MIN_TRIP_MS], // a quiet loopback Redis: a hang trips at the floor
    [1.5, MIN_TRIP_MS],
    [10, MIN_TRIP_MS],
    [20, 80], // four times the slowest recent answer in between
    [40, 160],
    [50, MAX_TRIP_MS], // a healthy Redis on a loaded host: never below the ceiling
    [75, MAX_TRIP_MS],
    [10_000, MAX_TRIP_MS],
  ]
  for (const [slowest, threshold] of cases) {
    test(`slowest recent answer ${slowest} ms → trips after ${threshold} ms`, () => {
      expect(tripThresholdMs(slowest)).toBe(threshold)
    })
  }
})
