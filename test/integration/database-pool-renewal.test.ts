import { afterAll, describe, expect, test } from 'bun:test'
import { sql } from 'drizzle-orm'
import postgres from 'postgres'
import type { Config } from '../../src/config'
import { type DatabaseHandle, openDatabase, splitPool } from '../../src/db/client'
import type { PoolRenewal } from '../../src/db/renewable-pool'
import { sqlRows } from '../../src/db/rows'
import { periodicJobs } from '../../src/jobs'
import { answeredWithin, expectUnavailableWithin, settledWithin } from '../helpers/bounded-answers'
import { createSignedInUser, createSource, createUser } from '../helpers/factories'
import { holdEveryTable } from '../helpers/locks'
import { call, loggedLines, makeTestApp, testConfig } from '../helpers/test-app'
import { vanishingProxy } from '../helpers/vanishing-proxy'

/**
 * Drizzle's postgres.js pool (management requests, a source not yet cached, the log entries of
 * refused POSTs, and every hot statement with DATABASE_DRIVER=postgres-js) on a database host that
 * vanishes without closing its connections. Before DATABASE_UNANSWERED_CHECK_MS a statement sent on
 * such a connection waited until TCP gave up (~15 minutes, for ever behind a proxy that keeps the
 * socket), and postgres.js queued the next statements behind it once no connection was idle: every
 * management request of the replica hung. Now a statement unanswered for that long makes the replica
 * ask the server, on a new connection, whether the statement's backend is still at work: a backend
 * that is gone, or idle for as long while its answer never came, means the connection lost its server,
 * and the pool is replaced (what waited on the old one is answered 503 at once); a backend still at
 * work (a slow statement, a lock wait) is left alone. The LISTEN connection, which runs no statement,
 * is checked by a notification of the replica's own: not heard within as long, it listens again on
 * a new connection (before, a listener that lost its server kept the replica's caches stale for up
 * to their 5 minutes).
 */
const databaseUrl = process.env.DATABASE_URL
const CHECK_MS = 300
const SLACK_MS = 4_000
const RENEWED = 'database: the shared pool lost its server; replaced'
const LISTENING_AGAIN = 'database: the listening connection lost its server; listening again'

const opened: DatabaseHandle[] = []
const proxies: Array<{ stop(): void }> = []
afterAll(async () => {
  for (const proxy of proxies) proxy.stop()
  // a vanished connection never answers a goodbye: do not wait for one
  await Promise.all(opened.map((handle) => Promise.race([handle.close(), Bun.sleep(1_000)])))
})

/** The service on its own database handle, through a proxy that can vanish. */
async function serviceBehindProxy(env: Record<string, string>) {
  const proxy = vanishingProxy(new URL(databaseUrl!))
  proxies.push(proxy)
  const allEnv: Record<string, string> = {
    ...env,
    DATABASE_URL: proxy.url,
    DATABASE_UNANSWERED_CHECK_MS: String(CHECK_MS),
  }
  const config = testConfig(allEnv)
  const database = await openDatabase(config)
  opened.push(database)
  const { app, ctx, services } = await makeTestApp({
    env: allEnv as Partial<Record<keyof Config, string>>,
    database,
  })
  const shared = splitPool(config.databasePoolSize, config.databaseDriver, config.ingestPipeline).postgresJs
  return { proxy, database, app, ctx, services, shared }
}

describe.skipIf(!databaseUrl)("Drizzle's pool on a database host that vanishes", () => {
  for (const driver of ['bun-sql', 'postgres-js'] as const) {
    test(`${driver}: what waited is answered 503, the pool is replaced, the next management request is answered`, async () => {
      const { proxy, app, ctx, shared } = await serviceBehindProxy({ DATABASE_DRIVER: driver })
      const { organization, token } = await createSignedInUser(ctx)
      const { source } = await createSource(ctx, organization.id)
      const list = () => call(app, token, 'GET', '/api/webhook/sources')
      expect((await list()).status).toBe(200)
      let heard = 0
      await ctx.database.listen('pool_renewal_test', () => heard++)

      // Every connection of the pool has a statement in flight when the host vanishes.
      const inFlight = Array.from({ length: shared }, () =>
        ctx.db.execute(sql.raw('select pg_sleep(0.5)')).then(
          () => 'answered',
          // Drizzle wraps the driver's error
          (error: { cause?: { code?: string } }) => error.cause?.code ?? 'failed',
        ),
      )
      await Bun.sleep(100)
      expect(proxy.vanish()).toBeGreaterThan(0)

      // Behind them: answered 503 once the pool is found lost, not when TCP gives up.
      await expectUnavailableWithin(list(), { atLeastMs: CHECK_MS, withinMs: CHECK_MS + 500 + SLACK_MS })
      expect(await Promise.all(inFlight)).toEqual(Array(shared).fill('CONNECTION_DESTROYED'))
      const renewals = loggedLines(ctx).filter((line) => line.msg === RENEWED)
      expect(renewals).toEqual([
        expect.objectContaining({ level: 'error', unanswered_after_ms: CHECK_MS, lost_connections: shared }),
      ])

      // The failover's host: new connections are forwarded. No restart of the replica.
      const next = await answeredWithin(list(), SLACK_MS)
      expect(next.status).toBe(200)
      expect((await next.json()).data.map((row: { id: string }) => row.id)).toEqual([source.id])
      // The listener, its server lost too, is found by its own notification and listens again.
      const direct = postgres(databaseUrl!, { max: 1, onnotice: () => {} })
      try {
        const deadline = performance.now() + SLACK_MS
        while (heard === 0 && performance.now() < deadline) {
          await direct`select pg_notify('pool_renewal_test', 'after')`
          await Bun.sleep(50)
        }
      } finally {
        await direct.end({ timeout: 5 })
      }
      expect(heard).toBeGreaterThan(0)
      expect(loggedLines(ctx).filter((line) => line.msg === LISTENING_AGAIN)).toEqual([
        expect.objectContaining({ level: 'error', not_heard_within_ms: CHECK_MS }),
      ])
    }, 30_000)
  }

  test('a listener alone lost its server: it listens again, and its onConnect runs (the caches drop)', async () => {
    const { proxy, ctx } = await serviceBehindProxy({})
    let heard = 0
    let connected = 0
    await ctx.database.listen(
      'pool_renewal_listener_test',
      () => heard++,
      () => connected++,
    )
    expect(connected).toBe(1)
    // Every connection open now is lost: the listener's, and the pool's idle ones.
    expect(proxy.vanish()).toBeGreaterThan(0)
    const direct = postgres(databaseUrl!, { max: 1, onnotice: () => {} })
    try {
      await direct`select pg_notify('pool_renewal_listener_test', 'lost')`
      const deadline = performance.now() + SLACK_MS + 4 * CHECK_MS
      while (connected < 2 && performance.now() < deadline) await Bun.sleep(20)
      expect(connected).toBe(2)
      expect(heard).toBe(0)
      await direct`select pg_notify('pool_renewal_listener_test', 'heard')`
      while (heard === 0 && performance.now() < deadline) await Bun.sleep(20)
      expect(heard).toBe(1)
    } finally {
      await direct.end({ timeout: 5 })
    }
    expect(loggedLines(ctx).filter((line) => line.msg === LISTENING_AGAIN)).toEqual([
      expect.objectContaining({ level: 'error', not_heard_within_ms: CHECK_MS }),
    ])
  }, 30_000)

  test('a slow statement is not a lost server: a lock wait longer than the check is left to finish', async () => {
    const { app, ctx } = await serviceBehindProxy({ DATABASE_LOCK_TIMEOUT_MS: '0' })
    const { token } = await createSignedInUser(ctx)
    const list = () => call(app, token, 'GET', '/api/webhook/sources')
    expect((await list()).status).toBe(200)
    const holder = postgres(databaseUrl!, { max: 1, onnotice: () => {} })
    try {
      await holder.unsafe('begin')
      await holder.unsafe('lock table webhook_sources in access exclusive mode')
      const waiting = list()
      await Bun.sleep(CHECK_MS * 5)
      await holder.unsafe('rollback')
      const answer = await answeredWithin(waiting, SLACK_MS)
      expect(answer.status).toBe(200)
      expect(await answer.json()).toEqual({ data: [], next_cursor: null })
    } finally {
      await holder.end({ timeout: 5 })
    }
    expect(loggedLines(ctx).filter((line) => line.level === 'error')).toEqual([])
  }, 30_000)

  // A periodic job waits on its statement like a request does, and a run never overlaps the one
  // before it while the replica's shutdown awaits the runs in progress: a job whose server vanished
  // would stop its next runs and the replica's exit until TCP gives up. The log retention runs on a
  // connection of its own (DatabaseHandle.openSession), watched as the shared pool is; before, it
  // opened a client of its own that nothing watched.
  test('every periodic job whose statement lost its server ends within the check; none waits for TCP', async () => {
    const { proxy, ctx, services } = await serviceBehindProxy({ DATABASE_LOCK_TIMEOUT_MS: '0' })
    const { organization } = await createSignedInUser(ctx)
    await createSource(ctx, organization.id)
    const jobs = periodicJobs(ctx, services)
    // Each job once, on a server that answers: what they open is open before the host vanishes.
    for (const job of jobs) await job.run(() => false)
    // Each job's statements wait for a lock, so that each is in flight when the host vanishes; the
    // lock goes after it, the statements run and their answers are lost on the way.
    const release = await holdEveryTable(databaseUrl!)
    const runs = jobs.map((job) => job.run(() => false))
    let outcomes: string[]
    try {
      await Bun.sleep(CHECK_MS)
      expect(proxy.vanish()).toBeGreaterThan(0)
    } finally {
      await release()
    }
    try {
      outcomes = await Promise.all(runs.map((run) => settledWithin(run, 2 * CHECK_MS + SLACK_MS)))
    } finally {
      // what still waits waits on a lost connection: the proxy's end closes it
      proxy.stop()
      await Promise.allSettled(runs)
    }
    const byJob = Object.fromEntries(jobs.map((job, index) => [job.name, outcomes[index]]))
    expect(byJob).toEqual(
      Object.fromEntries(
        jobs.map((job) => [
          job.name,
          expect.stringMatching(/^(resolved|rejected CONNECTION_(DESTROYED|CLOSED))$/),
        ]),
      ),
    )
    // The log retention's statement was on its own connection when the host vanished.
    expect(byJob['log retention']).toBe('rejected CONNECTION_DESTROYED')
    expect(
      loggedLines(ctx).filter(
        (line) => line.msg === 'database: a connection of its own lost its server; replaced',
      ),
    ).toEqual([
      expect.objectContaining({
        level: 'error',
        application_name: 'lead-capture-retention',
        unanswered_after_ms: CHECK_MS,
      }),
    ])
  }, 30_000)

  test("a transaction's statement on a lost connection (a member's role change): 503 within the check", async () => {
    const { proxy, app, ctx } = await serviceBehindProxy({ DATABASE_LOCK_TIMEOUT_MS: '0' })
    const { organization, token } = await createSignedInUser(ctx)
    const member = await createUser(ctx, organization.id, { role: 'member' })
    const release = await holdEveryTable(databaseUrl!)
    let answer: Promise<Response>
    try {
      answer = call(app, token, 'PATCH', `/api/v2/members/${member.id}`, { role: 'admin' })
      await Bun.sleep(CHECK_MS)
      expect(proxy.vanish()).toBeGreaterThan(0)
    } finally {
      await release()
    }
    await expectUnavailableWithin(answer, { atLeastMs: 0, withinMs: 2 * CHECK_MS + SLACK_MS })
    expect(loggedLines(ctx).filter((line) => line.msg === RENEWED)).toEqual([
      expect.objectContaining({ level: 'error', unanswered_after_ms: CHECK_MS }),
    ])
  }, 30_000)

  // With nothing listening there is no heartbeat to find a lost pool: only the statements are
  // watched, the transaction's included.
  test("a transaction's statement on a lost connection, nothing listening: it fails within the check", async () => {
    const proxy = vanishingProxy(new URL(databaseUrl!))
    proxies.push(proxy)
    const database = await openDatabase(
      testConfig({
        DATABASE_URL: proxy.url,
        DATABASE_UNANSWERED_CHECK_MS: String(CHECK_MS),
        DATABASE_LOCK_TIMEOUT_MS: '0',
      }),
    )
    opened.push(database)
    const renewals: PoolRenewal[] = []
    database.onPoolRenewed((renewal) => renewals.push(renewal))
    expect(await sqlRows(database.db, sql`select 1 as one`)).toEqual([{ one: 1 }])
    const release = await holdEveryTable(databaseUrl!)
    let transaction: Promise<unknown>
    try {
      transaction = database.db.transaction((tx) => sqlRows(tx, sql`select count(*) from webhook_sources`))
      void transaction.catch(() => {})
      await Bun.sleep(CHECK_MS)
      expect(proxy.vanish()).toBeGreaterThan(0)
    } finally {
      await release()
    }
    expect(await settledWithin(transaction, 2 * CHECK_MS + SLACK_MS)).toMatch(
      /^rejected CONNECTION_(DESTROYED|CLOSED)$/,
    )
    expect(renewals).toEqual([
      expect.objectContaining({ part: 'statements', unansweredStatements: 1, lostConnections: 1 }),
    ])
    expect(await answeredWithin(sqlRows(database.db, sql`select 1 as one`), SLACK_MS)).toEqual([{ one: 1 }])
  }, 30_000)
})
