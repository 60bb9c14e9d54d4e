import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { eq } from 'drizzle-orm'
import type { AppContext } from '../../src/context'
import { webhookSources } from '../../src/db/schema'
import { SOURCE_CHANNEL } from '../../src/modules/sources/source-cache'
import { createOrganization, createSource } from '../helpers/factories'
import {
  cleanupAll,
  createPostgresCluster,
  type PostgresCluster,
  postgresBinDir,
  postLead,
  type Replica,
  type Sent,
  seedContext,
  spawnReplica,
  uniqueEmail,
  waitUntil,
} from './support'

const REQUEST_TIMEOUT_MS = 8000

async function readyStatus(replica: Replica): Promise<number> {
  const response = await fetch(`${replica.url}/readyz`, { signal: AbortSignal.timeout(5000) }).catch(
    () => null,
  )
  return response?.status ?? 0
}

/**
 * The database goes away (a cluster of this file's own, stopped with `pg_ctl -m immediate`, as a
 * crash would) and comes back. Meanwhile every request is answered quickly with 503 and
 * Retry-After, never 500 and never a hang; afterwards the replicas recover by themselves, no lead
 * answered with 200 is missing, and source changes still reach every replica (LISTEN came back).
 */
describe.skipIf(!process.env.DATABASE_URL || !postgresBinDir())('PostgreSQL outage', () => {
  let cluster: PostgresCluster
  let ctx: AppContext
  let organizationId: string
  let sources: Array<{ source: { id: string }; apiKey: string }>
  let replicas: Replica[]

  beforeAll(async () => {
    cluster = await createPostgresCluster()
    await cluster.start()
    ctx = await seedContext(cluster.url)
    organizationId = (await createOrganization(ctx)).id
    sources = await Promise.all(Array.from({ length: 8 }, () => createSource(ctx, organizationId)))
    const env = { DATABASE_URL: cluster.url, DATABASE_POOL_SIZE: '4' }
    replicas = await Promise.all([spawnReplica({ env }), spawnReplica({ env })])
  }, 90_000)

  afterAll(cleanupAll, 60_000)

  test('503 with Retry-After during the outage, recovery within 5 s, no confirmed lead lost', async () => {
    const confirmed: Sent[] = []
    const send = async (index: number, label: string) => {
      const sent = await postLead(
        replicas[index % 2]!.url,
        sources[index % sources.length]!.apiKey,
        { email: uniqueEmail(label) },
        REQUEST_TIMEOUT_MS,
      )
      if (sent.status === 200) confirmed.push(sent)
      return sent
    }

    // Before: both replicas serve and have every source cached.
    const before = await Promise.all(Array.from({ length: 16 }, (_, index) => send(index, 'before')))
    expect(before.map((sent) => sent.status)).toEqual(before.map(() => 200))

    // A burst in flight while the database dies: each request is a 200 or a 503, nothing else.
    const burst = Promise.all(Array.from({ length: 24 }, (_, index) => send(index, 'crash')))
    await Bun.sleep(20)
    await cluster.stop('immediate')
    const crashed = await burst
    for (const sent of crashed) {
      expect(sent.timedOut ?? false).toBe(false)
      expect([200, 503]).toContain(sent.status)
    }

    // During: cached and uncached sources alike get 503 + Retry-After, quickly.
    const uncached = await createSource(ctx, organizationId).catch(() => null)
    expect(uncached).toBeNull() // the database really is down
    // The outage lasts about 3 s: long enough for many failed reconnects of the pool and of the
    // LISTEN connection (their back-off must not outgrow the outage).
    const during: Sent[] = []
    const outageStarted = Date.now()
    for (let index = 0; index < 100 && Date.now() - outageStarted < 3000; index++) {
      during.push(await send(index, 'during'))
      await Bun.sleep(50)
    }
    expect(during.length).toBeGreaterThanOrEqual(20)
    for (const sent of during) {
      expect(sent.timedOut ?? false).toBe(false)
      expect(sent.failed).toBeUndefined()
      expect(sent.status).toBe(503)
      expect(Number(sent.headers.get('retry-after'))).toBeGreaterThan(0)
      expect(sent.body).toMatchObject({
        error: 'service_unavailable',
        message: expect.any(String),
        request_id: expect.any(String),
      })
      expect(sent.ms).toBeLessThan(REQUEST_TIMEOUT_MS)
    }
    for (const replica of replicas) expect(await readyStatus(replica)).toBe(503)

    // After: the cluster returns; each replica is ready and ingesting again within 5 s, unaided.
    await cluster.start()
    const restartedAt = Date.now()
    for (const [index, replica] of replicas.entries()) {
      await waitUntil(
        async () => {
          if ((await readyStatus(replica)) !== 200) return false
          return (await send(index, 'recovered')).status === 200
        },
        5000 - (Date.now() - restartedAt),
        `${replica.url} recovered`,
      )
    }
    expect(Date.now() - restartedAt).toBeLessThanOrEqual(5000)

    // Nothing answered 200 is missing.
    const leadIds = confirmed.map((sent) => String(sent.body?.lead_id))
    expect(leadIds.length).toBeGreaterThanOrEqual(18)
    const rows = await ctx.database.query<{ id: string }>(
      'select id::text from leads where id = any($1::uuid[])',
      [leadIds],
    )
    const stored = new Set(rows.map((row) => row.id))
    expect(leadIds.filter((id) => !stored.has(id))).toEqual([])
  }, 90_000)

  test('after the outage a disabled source is still 404 on every replica within 1 s (LISTEN is back)', async () => {
    const { source, apiKey } = sources[0]!
    for (const replica of replicas) {
      expect((await postLead(replica.url, apiKey, { email: uniqueEmail('cached') })).status).toBe(200)
    }
    await ctx.db.update(webhookSources).set({ enabled: false }).where(eq(webhookSources.id, source.id))
    await ctx.database.notify(SOURCE_CHANNEL, source.id)
    await waitUntil(
      async () => {
        const sent = await Promise.all(
          replicas.map((replica) => postLead(replica.url, apiKey, { email: uniqueEmail('disabled') })),
        )
        return sent.every((result) => result.status === 404)
      },
      1000,
      'disabled source refused on both replicas',
    )
  }, 30_000)
})
