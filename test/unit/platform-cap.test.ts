import { describe, expect, test } from 'bun:test'
import { createMemoryLogger } from '../../src/lib/logger'
import {
  FLUSH_INTERVAL_MS,
  LocalPlatformCap,
  MemoryRateLimiter,
  type PlatformCap,
  RedisRateLimiter,
  SharedPlatformCap,
} from '../../src/lib/rate-limit'
import { REDIS_DRIVERS, type RedisDriver, redisConnectionsOfFile } from '../helpers/redis'

// The inbound route's platform-wide cap, decided without a round trip (platform-cap.ts).

const redisUrl = process.env.REDIS_URL
const openConnection = redisConnectionsOfFile()

const WINDOW = 60_000
/** A window's first millisecond: the sliding counter has no earlier window to weigh. */
const START = Date.UTC(2026, 0, 1)
const capRule = (limit: number) => ({ bucket: 'platform', key: 'all', limit, windowMs: WINDOW })

function allowedOf(cap: PlatformCap, requests: number, now = START): boolean[] {
  return Array.from({ length: requests }, () => cap.take(now).allowed)
}

describe('LocalPlatformCap', () => {
  test('exact for the replica: the limit passes, the next is refused with the wait to the window turn; peek counts nothing', () => {
    const cap = new LocalPlatformCap(capRule(3))
    expect(allowedOf(cap, 3)).toEqual([true, true, true])
    expect(cap.peek(START + 15_000)).toMatchObject({ allowed: false, remaining: 0, resetMs: 45_000 })
    expect(cap.take(START + 15_000)).toMatchObject({ allowed: false, remaining: 0, resetMs: 45_000 })
    // A quarter into the next window, three quarters of the previous one still count: 2 of 3.
    expect(cap.peek(START + WINDOW + 15_000)).toMatchObject({ allowed: true, remaining: 0 })
    expect(allowedOf(cap, 2, START + WINDOW + 15_000)).toEqual([true, false])
  })
})

async function sharedCap(url: string, driver: RedisDriver, prefix: string, limit: number) {
  const connection = openConnection(url, driver)
  await connection.waitReady(5000)
  expect(connection.ready).toBe(true)
  return { connection, cap: new SharedPlatformCap(connection, capRule(limit), createMemoryLogger(), prefix) }
}

const settle = () => Bun.sleep(FLUSH_INTERVAL_MS * 4)

describe.if(Boolean(redisUrl)).each(REDIS_DRIVERS)('SharedPlatformCap (redis, %s)', (driver) => {
  test('replicas share one total within a flush interval: what one admitted, the other no longer can', async () => {
    const prefix = `rl:test:${crypto.randomUUID()}:`
    const first = await sharedCap(redisUrl!, driver, prefix, 10)
    const second = await sharedCap(redisUrl!, driver, prefix, 10)
    expect(allowedOf(first.cap, 6)).toEqual(Array(6).fill(true))
    await settle()
    // The second replica learns the total with its own first flush; until then it counts its own.
    expect(allowedOf(second.cap, 4)).toEqual(Array(4).fill(true))
    await settle()
    expect(second.cap.take(START).allowed).toBe(false)
    // The first replica read the total when it last sent (6): it admits one more, sends it and
    // reads the total back, then refuses. The cap holds within one interval's requests per replica.
    expect(first.cap.take(START).allowed).toBe(true)
    await settle()
    expect(first.cap.take(START).allowed).toBe(false)
    await first.cap.close()
    await second.cap.close()
  })

  test('management requests (the limiter script) and the inbound cap count in the same counters', async () => {
    // Above EXACT_LOG_MAX_LIMIT, where the limiter keeps window counters too (the default cap is 600,000).
    const limit = 20_000
    const prefix = `rl:test:${crypto.randomUUID()}:`
    const { connection, cap } = await sharedCap(redisUrl!, driver, prefix, limit)
    const limiter = new RedisRateLimiter(connection, new MemoryRateLimiter(), createMemoryLogger(), prefix)
    expect(allowedOf(cap, 7)).toEqual(Array(7).fill(true))
    await settle()
    const management = await limiter.check([capRule(limit)], START + 1)
    expect(management.decisive).toMatchObject({ bucket: 'platform', remaining: limit - 8 })
    // The cap learns of the management request with its next send, not before.
    expect(cap.take(START + 2)).toMatchObject({ allowed: true, remaining: limit - 8 })
    await settle()
    expect(cap.peek(START + 3)).toMatchObject({ allowed: true, remaining: limit - 10 })
    await cap.close()
  })
})

describe('SharedPlatformCap without an answer from Redis', () => {
  test('counts on its own: never waits, never throws, refuses past the cap', async () => {
    // Nothing listens on port 1: every call fails at once.
    const connection = openConnection('redis://127.0.0.1:1', 'ioredis')
    const cap = new SharedPlatformCap(
      connection,
      capRule(3),
      createMemoryLogger(),
      `rl:test:${crypto.randomUUID()}:`,
    )
    expect(allowedOf(cap, 2)).toEqual([true, true])
    await settle()
    expect(allowedOf(cap, 2)).toEqual([true, false])
    await cap.close()
  })
})
