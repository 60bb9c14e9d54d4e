import { afterAll, describe, expect, test } from 'bun:test'
import { eq } from 'drizzle-orm'
import type { Config } from '../../src/config'
import { type DatabaseHandle, openDatabase } from '../../src/db/client'
import { leads } from '../../src/db/schema'
import { periodicJobs } from '../../src/jobs'
import { answeredWithin, expectUnavailableWithin, settledWithin } from '../helpers/bounded-answers'
import { uniqueEmail } from '../helpers/emails'
import { createLead, createSignedInUser, createSource } from '../helpers/factories'
import { logsOf, post } from '../helpers/inbound'
import { holdEveryTable, holdLock as holdLockOn } from '../helpers/locks'
import { call, makeTestApp, request, testConfig } from '../helpers/test-app'

/**
 * A request that waits on a lock someone else holds (a migration's `ALTER TABLE`, an operator's
 * `LOCK TABLE` or `VACUUM FULL`, a source being deleted with a million log rows) waits at most
 * DATABASE_LOCK_TIMEOUT_MS, then answers 503 service_unavailable with Retry-After, and what it
 * would have written is not written. Before the setting, such a request waited as long as the lock
 * was held (35 s and counting, with /readyz saying ready). The class: every table the inbound path
 * writes or reads, the source's advisory lock the writers take, and each management read, on both
 * clients of the hot statements; readiness is not affected (a lock is the database's, not the
 * replica's: taking every replica out of the load balancer would stop what still works).
 */
const databaseUrl = process.env.DATABASE_URL
const LOCK_TIMEOUT_MS = 300
/** How long past the lock timeout an answer may take (the group's own statement, a busy CI). */
const ANSWER_SLACK_MS = 4_000
const DRIVERS = ['bun-sql', 'postgres-js'] as const

const opened: DatabaseHandle[] = []
afterAll(async () => {
  for (const handle of opened) await handle.close()
})

/** One app per client of the hot statements, on a database handle with the short lock timeout. */
const apps = new Map<Config['databaseDriver'], ReturnType<typeof makeTestApp>>()
function appWithLockTimeout(driver: Config['databaseDriver']) {
  let app = apps.get(driver)
  if (!app) {
    const env = { DATABASE_DRIVER: driver, DATABASE_LOCK_TIMEOUT_MS: String(LOCK_TIMEOUT_MS) }
    app = openDatabase(testConfig(env)).then((database) => {
      opened.push(database)
      return makeTestApp({ env, database })
    })
    apps.set(driver, app)
  }
  return app
}

/** A lock held on `statement` (test/helpers/locks.ts) until the returned release is called. */
const holdLock = (statement: string, params: string[] = []) => holdLockOn(databaseUrl!, statement, params)

/**
 * The locks a webhook POST can meet: each table ingest_leads() and log_deliveries() read or write,
 * and the source's advisory lock, which is what a source's delete holds while it removes the
 * source's delivery log (webhook_sources_wait_for_writers).
 */
const INBOUND_LOCKS: Array<{ name: string; statement: (sourceId: string) => [string, string[]] }> = [
  ...['leads', 'delivery_logs', 'inbound_rate_windows', 'webhook_endpoints', 'webhook_sources'].map(
    (table) => ({
      name: table,
      statement: (): [string, string[]] => [`lock table ${table} in access exclusive mode`, []],
    }),
  ),
  {
    name: "the source's advisory lock",
    statement: (sourceId) => [
      `select pg_advisory_xact_lock(hashtextextended('source:' || $1, 0))`,
      [sourceId],
    ],
  },
]

/**
 * What a webhook POST can be, each with the locks it waits on and its answer when nothing holds
 * them: a new lead (group commit), and two refusals that are still counted against the key and
 * logged (log_deliveries(), on the request's path: the per-key limit's verdict comes from it).
 */
const INBOUND_KINDS: Array<{
  name: string
  body: (address: string) => { json?: unknown; raw?: string }
  waitsOn: string[]
  status: number
  answer: Record<string, unknown>
  /** Whether the kind stores a lead under the address. */
  stores: boolean
}> = [
  {
    name: 'a new lead',
    body: (address) => ({ json: { email: address } }),
    waitsOn: INBOUND_LOCKS.map((lock) => lock.name),
    status: 200,
    answer: { status: 'created', success: true },
    stores: true,
  },
  {
    name: 'a submission without contact (missing_contact)',
    body: () => ({ json: { first_name: 'Ada' } }),
    waitsOn: ['delivery_logs', 'inbound_rate_windows', 'webhook_sources', "the source's advisory lock"],
    status: 200,
    answer: { status: 'error', success: false, error: 'missing_contact' },
    stores: false,
  },
  {
    name: 'a body that is not JSON',
    body: () => ({ raw: '{"email": ' }),
    waitsOn: ['delivery_logs', 'inbound_rate_windows', 'webhook_sources', "the source's advisory lock"],
    status: 400,
    answer: { error: 'invalid_json' },
    stores: false,
  },
]

function postKind(
  app: Awaited<ReturnType<typeof makeTestApp>>['app'],
  apiKey: string,
  body: { json?: unknown; raw?: string },
) {
  if (body.json !== undefined) return post(app, apiKey, body.json)
  return app.handle(
    request('POST', `/api/webhook/lead/${apiKey}`, {
      body: body.raw,
      headers: { 'content-type': 'application/json' },
    }),
  )
}

describe.skipIf(!databaseUrl).each(DRIVERS)('a lock held elsewhere, hot statements on %s', (driver) => {
  for (const kind of INBOUND_KINDS) {
    for (const lock of INBOUND_LOCKS) {
      const waits = kind.waitsOn.includes(lock.name)
      const outcome = waits
        ? '503 + Retry-After within the timeout, nothing written, answered as usual once released'
        : `answered as usual (${kind.status}) without waiting`
      test(`webhook POST, ${kind.name}, behind ${lock.name}: ${outcome}`, async () => {
        const { app, ctx } = await appWithLockTimeout(driver)
        const { organization } = await createSignedInUser(ctx)
        const { source, apiKey } = await createSource(ctx, organization.id)
        // the source is in the replica's cache before the lock, as it is for a source in use
        expect((await post(app, apiKey, { email: uniqueEmail('warm') })).status).toBe(200)
        const address = uniqueEmail('locked')
        const logCount = async () => (await logsOf(ctx, source.id)).length
        const logsBefore = await logCount()
        const [statement, params] = lock.statement(source.id)
        const release = await holdLock(statement, params)
        try {
          const posted = postKind(app, apiKey, kind.body(address))
          if (waits) {
            await expectUnavailableWithin(posted, {
              atLeastMs: LOCK_TIMEOUT_MS,
              withinMs: LOCK_TIMEOUT_MS + ANSWER_SLACK_MS,
            })
          } else {
            // answered as usual, before a lock wait would have ended
            const response = await answeredWithin(posted, LOCK_TIMEOUT_MS)
            expect(response.status).toBe(kind.status)
            expect(await response.json()).toMatchObject(kind.answer)
          }
          // readiness is the replica's, not a lock's
          const readiness = await app.handle(request('GET', '/readyz'))
          expect(readiness.status).toBe(200)
        } finally {
          await release()
        }
        const stored = () =>
          ctx.db.select({ id: leads.id }).from(leads).where(eq(leads.emailNormalized, address))
        // a refused request wrote nothing: no lead, no log entry
        expect(await stored()).toHaveLength(!waits && kind.stores ? 1 : 0)
        expect(await logCount()).toBe(logsBefore + (waits ? 0 : 1))
        if (waits) {
          const retried = await postKind(app, apiKey, kind.body(address))
          expect(retried.status).toBe(kind.status)
          expect(await retried.json()).toMatchObject(kind.answer)
          expect(await stored()).toHaveLength(kind.stores ? 1 : 0)
          expect(await logCount()).toBe(logsBefore + 1)
        }
      }, 20_000)
    }
  }

  const MANAGEMENT_READS: Array<{ table: string; path: (sourceId: string) => string }> = [
    { table: 'delivery_logs', path: (sourceId) => `/api/webhook/sources/${sourceId}/logs` },
    { table: 'leads', path: () => '/api/v2/leads' },
    { table: 'webhook_sources', path: (sourceId) => `/api/webhook/sources/${sourceId}` },
  ]
  for (const read of MANAGEMENT_READS) {
    test(`GET ${read.path(':id')} behind a lock on ${read.table}: 503 within the timeout, 200 once released`, async () => {
      const { app, ctx } = await appWithLockTimeout(driver)
      const { organization, token } = await createSignedInUser(ctx)
      const { source } = await createSource(ctx, organization.id)
      await createLead(ctx, organization.id, { sourceId: source.id, email: uniqueEmail('read') })
      const release = await holdLock(`lock table ${read.table} in access exclusive mode`)
      try {
        await expectUnavailableWithin(call(app, token, 'GET', read.path(source.id)), {
          atLeastMs: LOCK_TIMEOUT_MS,
          withinMs: LOCK_TIMEOUT_MS + ANSWER_SLACK_MS,
        })
      } finally {
        await release()
      }
      const after = await call(app, token, 'GET', read.path(source.id))
      expect(after.status).toBe(200)
    }, 20_000)
  }
})

// The replica's periodic jobs (src/jobs.ts) run on connections of the same pools, and the log
// retention on a connection of its own (DatabaseHandle.openSession): each meets the timeout too. A
// job that waited instead would hold its next runs (a run never overlaps the one before) and the
// replica's shutdown, which awaits the runs in progress. The log retention's connection had no
// lock_timeout until it was opened by the handle.
describe.skipIf(!databaseUrl)('periodic jobs behind a lock on every table', () => {
  test('every job ends within the lock timeout: it fails with 55P03 (retried on its next tick) or had nothing to wait for', async () => {
    const { ctx, services } = await appWithLockTimeout('bun-sql')
    const jobs = periodicJobs(ctx, services)
    const release = await holdEveryTable(databaseUrl!)
    let runs: Array<Promise<unknown>> = []
    try {
      runs = jobs.map((job) => job.run(() => false))
      const outcomes = await Promise.all(
        runs.map((run) => settledWithin(run, LOCK_TIMEOUT_MS + ANSWER_SLACK_MS)),
      )
      expect(Object.fromEntries(jobs.map((job, index) => [job.name, outcomes[index]]))).toEqual(
        Object.fromEntries(
          jobs.map((job) => [job.name, expect.stringMatching(/^(resolved|rejected 55P03)$/)]),
        ),
      )
      // The log retention reads and deletes log entries: it cannot have had nothing to wait for.
      expect(outcomes[jobs.findIndex((job) => job.name === 'log retention')]).toBe('rejected 55P03')
    } finally {
      await release()
      await Promise.allSettled(runs)
    }
  }, 30_000)
})
