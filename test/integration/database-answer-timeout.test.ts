import { afterAll, describe, expect, test } from 'bun:test'
import { sql } from 'drizzle-orm'
import postgres from 'postgres'
import type { Config } from '../../src/config'
import { type DatabaseHandle, openDatabase } from '../../src/db/client'
import { answeredWithin, expectUnavailableWithin } from '../helpers/bounded-answers'
import { uniqueEmail } from '../helpers/emails'
import { createOrganization, createSource } from '../helpers/factories'
import { post } from '../helpers/inbound'
import { loggedLines, makeTestApp, testConfig } from '../helpers/test-app'
import { vanishingProxy } from '../helpers/vanishing-proxy'

/**
 * A database host that vanishes without closing its connections (a crashed machine, a failover
 * behind a proxy or NAT that keeps the sockets open): nothing answers, and TCP gives up only after
 * ~15 minutes, or never when a proxy keeps acknowledging. Before INGEST_ANSWER_TIMEOUT_MS the
 * group commit's statement waited for that answer, and with one group in flight every later lead
 * of the replica waited behind it: webhook POSTs unanswered after 10 s, five in a row, while
 * /readyz answered 200 again after ~50 s (its ping found fresh connections). Now a group without an
 * answer is answered 503 + Retry-After within the timeout, the hot statements' connections are
 * replaced (or, with postgres.js, the shared pool once found lost), and the next lead is stored on a
 * new connection (the failover's host) without a restart.
 *
 * The host is a TCP proxy of the test's own on a free loopback port (test/helpers/vanishing-proxy.ts).
 */
const databaseUrl = process.env.DATABASE_URL
const ANSWER_TIMEOUT_MS = 600
const ANSWER_SLACK_MS = 4_000

const opened: DatabaseHandle[] = []
const proxies: Array<{ stop(): void }> = []
afterAll(async () => {
  for (const proxy of proxies) proxy.stop()
  // a vanished connection never answers a goodbye: do not wait for one
  await Promise.all(opened.map((handle) => Promise.race([handle.close(), Bun.sleep(1_000)])))
})

/**
 * `hotReplaced`: the group commit's own connections (Bun.sql's pool, the pipelined connection) are
 * replaced when its answer does not come. With DATABASE_DRIVER=postgres-js the group commit's
 * statements run on Drizzle's postgres.js pool instead, which is replaced once the replica has found
 * that its unanswered statement's backend is idle on the server (DATABASE_UNANSWERED_CHECK_MS,
 * src/db/renewable-pool.ts; test/integration/database-pool-renewal.test.ts): the next lead is
 * stored either way.
 */
const VARIANTS: Array<{ name: string; env: Record<string, string>; hotReplaced: boolean }> = [
  { name: 'Bun.sql (the default)', env: { DATABASE_DRIVER: 'bun-sql' }, hotReplaced: true },
  {
    name: 'Bun.sql with the pipelined group connection',
    env: { DATABASE_DRIVER: 'bun-sql', INGEST_PIPELINE: 'true' },
    hotReplaced: true,
  },
  { name: 'postgres.js', env: { DATABASE_DRIVER: 'postgres-js' }, hotReplaced: false },
]

describe.skipIf(!databaseUrl)('the database host vanishes', () => {
  for (const variant of VARIANTS) {
    test(`${variant.name}: a lead without an answer is 503 within INGEST_ANSWER_TIMEOUT_MS; the next is stored on new connections`, async () => {
      const proxy = vanishingProxy(new URL(databaseUrl!))
      proxies.push(proxy)
      const env: Record<string, string> = {
        ...variant.env,
        DATABASE_URL: proxy.url,
        INGEST_ANSWER_TIMEOUT_MS: String(ANSWER_TIMEOUT_MS),
        // after the answer timeout: the first lead's 503 is the group commit's
        DATABASE_UNANSWERED_CHECK_MS: String(ANSWER_TIMEOUT_MS * 2),
      }
      const database = await openDatabase(testConfig(env))
      opened.push(database)
      const { app, ctx } = await makeTestApp({ env: env as Partial<Record<keyof Config, string>>, database })
      const organization = await createOrganization(ctx)
      const { apiKey } = await createSource(ctx, organization.id)
      expect((await post(app, apiKey, { email: uniqueEmail('before') })).status).toBe(200)
      // Every connection of every pool open before the host vanishes, as on a replica under load:
      // a pool that opened a new one for the next statement would hide the old ones.
      const poolSize = testConfig(env).databasePoolSize
      const busy = 'select pg_sleep(0.05)'
      await Promise.all([
        ...Array.from({ length: poolSize }, () => database.query(busy, [])),
        ...Array.from({ length: poolSize }, () => ctx.db.execute(sql.raw(busy))),
        ...(database.pipeline ? [database.pipeline.query(busy, [])] : []),
      ])

      expect(proxy.vanish()).toBeGreaterThan(0)
      const lost = uniqueEmail('vanished')
      await expectUnavailableWithin(post(app, apiKey, { email: lost }), {
        atLeastMs: ANSWER_TIMEOUT_MS,
        withinMs: ANSWER_TIMEOUT_MS + ANSWER_SLACK_MS,
      })
      expect(
        loggedLines(ctx).filter((line) => line.msg === 'group commit: no answer from the database'),
      ).toEqual([
        expect.objectContaining({
          level: 'error',
          timeout_ms: ANSWER_TIMEOUT_MS,
          size: 1,
          connections_replaced: variant.hotReplaced,
        }),
      ])
      const renewed = () =>
        loggedLines(ctx).filter((line) => line.msg === 'database: the shared pool lost its server; replaced')
      if (!variant.hotReplaced) {
        // the abandoned group statement is found lost: the shared pool is replaced
        const deadline = performance.now() + ANSWER_SLACK_MS
        while (renewed().length === 0 && performance.now() < deadline) await Bun.sleep(20)
        expect(renewed()).toEqual([expect.objectContaining({ level: 'error', lost_connections: 1 })])
      } else expect(renewed()).toEqual([])

      // The failover's host: new connections are forwarded. No restart of the replica.
      const after = uniqueEmail('after')
      const next = await answeredWithin(
        post(app, apiKey, { email: after }),
        ANSWER_TIMEOUT_MS + ANSWER_SLACK_MS,
      )
      expect(next.status).toBe(200)
      expect(await next.json()).toMatchObject({ status: 'created', success: true })
      // read on a connection of the test's own, straight to the server
      const direct = postgres(databaseUrl!, { max: 1, onnotice: () => {} })
      try {
        const rowsOf = (address: string) => direct`select id from leads where email_normalized = ${address}`
        expect(await rowsOf(after)).toHaveLength(1)
        // The vanished statement never reached the server: the lead answered 503 was not stored.
        expect(await rowsOf(lost)).toHaveLength(0)
      } finally {
        await direct.end({ timeout: 5 })
      }
    }, 30_000)
  }
})

/**
 * The other side of the timeout: a server that is slow, not gone. The group's statement waits on a
 * lock (DATABASE_LOCK_TIMEOUT_MS=0: as long as it is held) past INGEST_ANSWER_TIMEOUT_MS, so its
 * lead is answered 503; the connection is closed under it, but the server only notices once it
 * writes the answer, so the statement may still commit when the lock goes. A 503 from the timeout
 * therefore means "unknown", and the sender's retry is merged with the stored lead: one row, never
 * two.
 */
describe.skipIf(!databaseUrl)('a database slower than INGEST_ANSWER_TIMEOUT_MS', () => {
  test('503 within the timeout; once the lock goes, a retry is answered 200 and the lead exists once', async () => {
    const env = { INGEST_ANSWER_TIMEOUT_MS: String(ANSWER_TIMEOUT_MS), DATABASE_LOCK_TIMEOUT_MS: '0' }
    const database = await openDatabase(testConfig(env))
    opened.push(database)
    const { app, ctx } = await makeTestApp({ env, database })
    const organization = await createOrganization(ctx)
    const { apiKey } = await createSource(ctx, organization.id)
    expect((await post(app, apiKey, { email: uniqueEmail('warm') })).status).toBe(200)
    const holder = postgres(databaseUrl!, { max: 1, onnotice: () => {} })
    const address = uniqueEmail('slow')
    try {
      await holder.unsafe('begin')
      await holder.unsafe('lock table delivery_logs in access exclusive mode')
      await expectUnavailableWithin(post(app, apiKey, { email: address }), {
        atLeastMs: ANSWER_TIMEOUT_MS,
        withinMs: ANSWER_TIMEOUT_MS + ANSWER_SLACK_MS,
      })
      await holder.unsafe('rollback')
      const retried = await post(app, apiKey, { email: address })
      expect(retried.status).toBe(200)
      const answer = await retried.json()
      expect(answer).toMatchObject({ success: true })
      expect(['created', 'updated']).toContain(answer.status)
      const rows = await holder`select id from leads where email_normalized = ${address}`
      expect(rows).toHaveLength(1)
      expect(rows[0]!.id).toBe(answer.lead_id)
    } finally {
      await holder.end({ timeout: 5 })
    }
  }, 30_000)
})
