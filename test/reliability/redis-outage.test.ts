import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import type { AppContext } from '../../src/context'
import { createOrganization, createSource } from '../helpers/factories'
import {
  cleanupAll,
  createTestDatabase,
  postLead,
  type RedisServer,
  type Replica,
  redisServer,
  redisServerAvailable,
  seedContext,
  spawnReplica,
  type TestDatabase,
  uniqueEmail,
  waitUntil,
} from './support'

interface Readiness {
  status: string
  rate_limiter: { kind: string; status: 'up' | 'degraded' }
}

async function readiness(replica: Replica): Promise<{ status: number; body: Readiness }> {
  const response = await fetch(`${replica.url}/readyz`, { signal: AbortSignal.timeout(3000) })
  return { status: response.status, body: (await response.json()) as Readiness }
}

/**
 * Redis is a shared rate-limit store, not a dependency of ingestion: while it is down requests are
 * neither refused nor slowed, and the per-key limit stays exact across replicas (PostgreSQL holds
 * it: docs/architecture.md "One round trip"); the management limits and the platform cap are kept
 * per replica meanwhile (fail open). When it comes back the replicas reconnect by themselves and
 * the shared limits are shared again.
 */
describe.skipIf(!process.env.DATABASE_URL || !redisServerAvailable())('Redis outage', () => {
  let database: TestDatabase
  let ctx: AppContext
  let organizationId: string
  let redis: RedisServer
  let replicas: Replica[]

  beforeAll(async () => {
    database = await createTestDatabase()
    ctx = await seedContext(database.url)
    organizationId = (await createOrganization(ctx)).id
    redis = redisServer()
    await redis.start()
    const env = { DATABASE_URL: database.url, REDIS_URL: redis.url, DATABASE_POOL_SIZE: '4' }
    replicas = await Promise.all([spawnReplica({ env }), spawnReplica({ env })])
  }, 60_000)

  afterAll(cleanupAll, 30_000)

  test('ingestion goes on with fast 200s while Redis is down; shared limits resume when it returns', async () => {
    for (const replica of replicas) {
      const { status, body } = await readiness(replica)
      expect(status).toBe(200)
      expect(body.rate_limiter).toMatchObject({ kind: 'redis', status: 'up' })
    }

    await redis.kill()

    // 40 requests over 4 sources during the outage, half of them concurrent: all 200, each within 1 s.
    const sources = await Promise.all(Array.from({ length: 4 }, () => createSource(ctx, organizationId)))
    const during = []
    for (let round = 0; round < 2; round++) {
      during.push(
        ...(await Promise.all(
          Array.from({ length: 10 }, (_, index) =>
            postLead(
              replicas[index % 2]!.url,
              sources[index % 4]!.apiKey,
              { email: uniqueEmail('outage') },
              5000,
            ),
          ),
        )),
      )
    }
    for (let index = 0; index < 20; index++) {
      during.push(
        await postLead(
          replicas[index % 2]!.url,
          sources[index % 4]!.apiKey,
          { email: uniqueEmail('outage') },
          5000,
        ),
      )
    }
    expect(during.map((sent) => sent.status)).toEqual(during.map(() => 200))
    expect(during.filter((sent) => sent.ms >= 1000).map((sent) => sent.ms)).toEqual([])
    // The limit headers still come (the per-key limit is decided by PostgreSQL).
    expect(during[0]!.headers.get('x-ratelimit-limit')).toBe('60')
    // …and the per-key limit stays exact across the replicas while Redis is down: of 61 requests on
    // a fresh key, alternating, the 61st is 429 (with Redis as its store it failed open per replica).
    const { apiKey: duringKey } = await createSource(ctx, organizationId)
    const limitedDuring: number[] = []
    for (let index = 0; index < 61; index++) {
      limitedDuring.push(
        (await postLead(replicas[index % 2]!.url, duringKey, { email: uniqueEmail('outage-limit') })).status,
      )
    }
    expect(limitedDuring.slice(0, 60)).toEqual(Array.from({ length: 60 }, () => 200))
    expect(limitedDuring[60]).toBe(429)
    for (const replica of replicas) {
      // The limiter's state is what its own calls found: a management request makes one.
      expect((await fetch(`${replica.url}/api/webhook/sources`)).status).toBe(401)
      const { status, body } = await readiness(replica)
      expect(status).toBe(200)
      expect(body.rate_limiter.status).toBe('degraded')
    }

    await redis.start()
    // ioredis reconnects on its own (retryStrategy, at most 2 s between attempts).
    for (const replica of replicas) {
      await waitUntil(
        async () => (await readiness(replica)).body.rate_limiter.status === 'up',
        10_000,
        `${replica.url} limiter back up`,
      )
    }

    // Still exact after: of 61 requests on a fresh key, alternating, the 61st is 429.
    const { apiKey } = await createSource(ctx, organizationId)
    const statuses: number[] = []
    for (let index = 0; index < 61; index++) {
      statuses.push(
        (await postLead(replicas[index % 2]!.url, apiKey, { email: uniqueEmail('resumed') })).status,
      )
    }
    expect(statuses.slice(0, 60)).toEqual(Array.from({ length: 60 }, () => 200))
    expect(statuses[60]).toBe(429)
  }, 90_000)
})
