import { afterAll, describe, expect, test } from 'bun:test'
import { sql } from 'drizzle-orm'
import postgres from 'postgres'
import type { Config } from '../../src/config'
import { type DatabaseHandle, openDatabase } from '../../src/db/client'
import { sqlRows } from '../../src/db/rows'
import { periodicJobs } from '../../src/jobs'
import { isDatabaseUnavailable } from '../../src/lib/errors'
import { withTimeout } from '../../src/lib/timeout'
import { expectServiceUnavailable, settledWithin } from '../helpers/bounded-answers'
import { createSignedInUser, createSource, createUser } from '../helpers/factories'
import { email, post } from '../helpers/inbound'
import { holdEveryTable } from '../helpers/locks'
import { call, loggedLines, makeTestApp, request, testConfig } from '../helpers/test-app'

/**
 * A session the server ends while a transaction runs on it: `pg_terminate_backend`, a fast shutdown
 * or restart (`pg_ctl stop -m fast`, the default of `systemctl restart`), a managed database's
 * maintenance or failover, `idle_in_transaction_session_timeout`. Each sends FATAL 57P01 and closes
 * the connection. postgres.js 3.4.9 then sent the transaction's ROLLBACK on the closed connection and
 * threw from a timer (`TypeError: null is not an object (evaluating 'socket.write')`,
 * porsager/postgres#1066, #1154, #1208; no release fixes it): an uncaught exception, which ends a
 * replica. Every transaction of the service runs on postgres.js (Drizzle's pool): the webhook
 * worker's delivery claim every second, the log roll-up every minute, sign-up, member changes. With
 * `patches/postgres@3.4.9.patch` the ROLLBACK fails like the statement before it (CONNECTION_CLOSED,
 * a 503 for a request, a retry on the next tick for a job) and the pool's next statement is answered.
 *
 * Each case waits for a lock held on every table, so that its transaction is on the server when the
 * test ends the session of every backend of the replica that waits for it.
 */
const databaseUrl = process.env.DATABASE_URL
const SLACK_MS = 4_000

const opened: DatabaseHandle[] = []
afterAll(async () => {
  for (const handle of opened) await handle.close()
})

async function replica(extraEnv: Record<string, string> = {}) {
  // No lock timeout: the transactions wait on the held locks until the test ends their sessions.
  // A pool of 3 leaves Drizzle one connection (src/db/client.ts splitPool): the statement after the
  // ended session is sent on the connection that had it.
  const env = { DATABASE_LOCK_TIMEOUT_MS: '0', DATABASE_POOL_SIZE: '3', ...extraEnv }
  const database = await openDatabase(testConfig(env))
  opened.push(database)
  return makeTestApp({ env: env as Partial<Record<keyof Config, string>>, database })
}
type Replica = Awaited<ReturnType<typeof replica>>

/**
 * Ends the session of every backend of the service that waits for a lock, once there is one (0 when
 * none came within `withinMs`).
 */
async function endWaitingSessions(admin: postgres.Sql, withinMs = SLACK_MS): Promise<number> {
  const deadline = performance.now() + withinMs
  while (performance.now() < deadline) {
    const [row] = await admin<{ ended: number }[]>`
      select count(pg_terminate_backend(pid))::int as ended from pg_stat_activity
      where application_name like 'lead-capture%' and wait_event_type = 'Lock' and pid <> pg_backend_pid()`
    if (row!.ended > 0) return row!.ended
    await Bun.sleep(20)
  }
  return 0
}

/** What waits for the locks: a transaction each, and what it ends as when its session is ended. */
const TRANSACTIONS: Array<{
  name: string
  run(replica: Replica, prepared: unknown): Promise<unknown>
  prepare?(replica: Replica): Promise<unknown>
  /** A request: answered 503 service_unavailable. Otherwise a rejection the service counts as unavailable. */
  request?: true
  env?: Record<string, string>
  /** What must work after it (by default a statement on Drizzle's pool). */
  next?(replica: Replica, prepared: unknown): Promise<void>
}> = [
  // The group commit's statement, on each client of the hot statements: not a transaction of the
  // driver's (ingest_leads() is one statement), and the next lead is stored.
  ...(['bun-sql', 'postgres-js'] as const).map((driver) => ({
    name: `a webhook POST (the group commit on ${driver})`,
    request: true as const,
    env: { DATABASE_DRIVER: driver },
    prepare: async ({ ctx, app }: Replica) => {
      const { organization } = await createSignedInUser(ctx)
      const { apiKey } = await createSource(ctx, organization.id)
      // the source cached, so the POST's one statement is the group commit's
      expect((await post(app, apiKey, { email: email() })).status).toBe(200)
      return apiKey
    },
    run: ({ app }: Replica, apiKey: unknown) => post(app, apiKey as string, { email: email() }),
    next: async ({ app }: Replica, apiKey: unknown) => {
      for (let attempt = 0; attempt < 3; attempt++) {
        const answer = await post(app, apiKey as string, { email: email() })
        expect(answer.status).toBe(200)
        expect(await answer.json()).toEqual(expect.objectContaining({ status: 'created', success: true }))
      }
    },
  })),
  {
    name: 'a statement outside a transaction',
    run: ({ ctx }) => sqlRows(ctx.db, sql`select count(*) from webhook_sources`),
  },
  {
    name: 'a Drizzle transaction',
    run: ({ ctx }) => ctx.db.transaction((tx) => sqlRows(tx, sql`select count(*) from webhook_sources`)),
  },
  {
    name: "the webhook worker's delivery claim",
    run: ({ services }) => services.deliveryWorker.deliverDue(),
  },
  {
    name: 'POST /api/auth/signup',
    request: true,
    run: ({ app }) =>
      app.handle(
        request('POST', '/api/auth/signup', {
          json: {
            email: `ended-${crypto.randomUUID()}@example.com`,
            password: 'correct horse battery staple',
            organization_name: 'Acme Ltd',
          },
        }),
      ),
  },
  {
    name: 'PATCH /api/v2/members/:id (a role change)',
    request: true,
    prepare: async ({ ctx }) => {
      const owner = await createSignedInUser(ctx)
      const member = await createUser(ctx, owner.organization.id, { role: 'member' })
      return { token: owner.token, memberId: member.id }
    },
    run: ({ app }, prepared) => {
      const { token, memberId } = prepared as { token: string; memberId: string }
      return call(app, token, 'PATCH', `/api/v2/members/${memberId}`, { role: 'admin' })
    },
  },
]

describe.skipIf(!databaseUrl)(
  'a session the server ends in the middle of a statement or a transaction',
  () => {
    for (const transaction of TRANSACTIONS) {
      test(`${transaction.name}: fails as unavailable, nothing thrown outside it, the next statement answered`, async () => {
        const target = await replica(transaction.env)
        const prepared = await transaction.prepare?.(target)
        const uncaught: unknown[] = []
        const collect = (error: unknown) => uncaught.push(error)
        process.on('uncaughtException', collect)
        const admin = postgres(databaseUrl!, { max: 1, onnotice: () => {} })
        const release = await holdEveryTable(databaseUrl!)
        // Settled as soon as it ends: a rejection is this test's to read, not an unhandled one.
        let outcome: Promise<{ value: unknown } | { error: unknown }> | null = null
        try {
          outcome = transaction.run(target, prepared).then(
            (value) => ({ value }),
            (error: unknown) => ({ error }),
          )
          // Until the case has ended: what reaches the locks first may be another backend of the
          // service (a write-behind flush of an earlier test's app, a sign-up still hashing its
          // password when one was found).
          let settled = false
          void outcome.then(() => {
            settled = true
          })
          let ended = 0
          const deadline = performance.now() + SLACK_MS
          while (!settled && performance.now() < deadline) ended += await endWaitingSessions(admin, 100)
          expect(ended).toBeGreaterThan(0)
        } finally {
          await release()
          await admin.end({ timeout: 5 })
        }
        try {
          const ended = await withTimeout(
            outcome!,
            SLACK_MS,
            () => new Error(`not settled within ${SLACK_MS} ms`),
          )
          if (transaction.request) {
            expect(ended).toEqual({ value: expect.any(Response) })
            const answer = (ended as { value: Response }).value
            await expectServiceUnavailable(answer)
          } else if ('error' in ended) {
            expect(isDatabaseUnavailable(ended.error)).toBe(true)
          } else {
            // a job that catches its own failures (the delivery worker logs it and polls again)
            expect(
              loggedLines(target.ctx).filter((line) => line.level === 'error' || line.level === 'warn'),
            ).not.toEqual([])
          }
          // a turn of the event loop for what the driver scheduled on the closed connection
          await Bun.sleep(50)
          expect(uncaught.map(String)).toEqual([])
          // The pool's next statement, on a new connection.
          if (transaction.next) await transaction.next(target, prepared)
          else expect(await sqlRows(target.ctx.db, sql`select 1 as one`)).toEqual([{ one: 1 }])
        } finally {
          process.off('uncaughtException', collect)
        }
      }, 30_000)
    }

    test('every periodic job with its sessions ended: none throws outside its run, the pool answers after', async () => {
      const target = await replica()
      const jobs = periodicJobs(target.ctx, target.services)
      const uncaught: unknown[] = []
      const collect = (error: unknown) => uncaught.push(error)
      process.on('uncaughtException', collect)
      const admin = postgres(databaseUrl!, { max: 1, onnotice: () => {} })
      const release = await holdEveryTable(databaseUrl!)
      let runs: Array<Promise<unknown>> = []
      try {
        // settledWithin is attached at once: a rejection here is not an unhandled one
        runs = jobs.map((job) => job.run(() => false))
        let left = runs.length
        for (const run of runs) void run.catch(() => {}).finally(() => left--)
        expect(await endWaitingSessions(admin)).toBeGreaterThan(0)
        // The jobs share one connection: each reaches the locks in turn.
        const deadline = performance.now() + SLACK_MS
        while (left > 0 && performance.now() < deadline) {
          await endWaitingSessions(admin, 200)
        }
      } finally {
        await release()
        await admin.end({ timeout: 5 })
      }
      try {
        const outcomes = await Promise.all(runs.map((run) => settledWithin(run, SLACK_MS)))
        // each ended, by its own rejection or its own catch: none waits on a closed connection
        expect(outcomes.filter((outcome) => outcome === 'still waiting')).toEqual([])
        await Bun.sleep(50)
        expect(uncaught.map(String)).toEqual([])
        expect(await sqlRows(target.ctx.db, sql`select 1 as one`)).toEqual([{ one: 1 }])
      } finally {
        process.off('uncaughtException', collect)
      }
    }, 30_000)
  },
)
