import { afterAll, describe, expect, test } from 'bun:test'
import { eq } from 'drizzle-orm'
import postgres from 'postgres'
import type { Config } from '../../src/config'
import { type DatabaseHandle, openDatabase } from '../../src/db/client'
import { leads } from '../../src/db/schema'
import { uniqueEmail } from '../helpers/emails'
import { createLead, createSignedInUser, createSource } from '../helpers/factories'
import { post } from '../helpers/inbound'
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
const holders: postgres.Sql[] = []
afterAll(async () => {
  for (const handle of opened) await handle.close()
  for (const holder of holders) await holder.end({ timeout: 5 })
})

async function appWithLockTimeout(driver: Config['databaseDriver']) {
  const env = { DATABASE_DRIVER: driver, DATABASE_LOCK_TIMEOUT_MS: String(LOCK_TIMEOUT_MS) }
  const database = await openDatabase(testConfig(env))
  opened.push(database)
  return makeTestApp({ env, database })
}

/**
 * Runs `statement` in a transaction of a connection of its own and keeps the transaction open (and
 * its locks held) until the returned release is called.
 */
async function holdLock(statement: string, params: string[] = []): Promise<() => Promise<void>> {
  const holder = postgres(databaseUrl!, { max: 1, onnotice: () => {} })
  holders.push(holder)
  const connection = await holder.reserve()
  await connection.unsafe('begin')
  await connection.unsafe(statement, params)
  return async () => {
    await connection.unsafe('rollback')
    connection.release()
  }
}

/** The response, or a failure naming how long it did not come. */
async function answeredWithin(response: Promise<Response>, ms: number): Promise<Response> {
  let timer: ReturnType<typeof setTimeout> | undefined
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms)
  })
  try {
    return await Promise.race([response, late])
  } finally {
    clearTimeout(timer)
  }
}

async function expectLockRefusal(response: Response): Promise<void> {
  expect(response.status).toBe(503)
  expect(response.headers.get('retry-after')).toBe('5')
  expect(response.headers.get('content-type')).toContain('application/json')
  expect(await response.json()).toEqual({
    error: 'service_unavailable',
    message: 'the service is temporarily unavailable, retry shortly',
    request_id: response.headers.get('x-request-id'),
  })
}

/** What a webhook's writers wait on: every table ingest_leads() reads or writes, and the source lock. */
const INBOUND_LOCKS: Array<{ name: string; statement: (sourceId: string) => [string, string[]] }> = [
  { name: 'leads', statement: () => ['lock table leads in access exclusive mode', []] },
  { name: 'delivery_logs', statement: () => ['lock table delivery_logs in access exclusive mode', []] },
  {
    name: 'inbound_rate_windows',
    statement: () => ['lock table inbound_rate_windows in access exclusive mode', []],
  },
  {
    name: 'webhook_endpoints',
    statement: () => ['lock table webhook_endpoints in access exclusive mode', []],
  },
  {
    // what a source's delete holds while it removes the source's logs (webhook_sources_wait_for_writers)
    name: "the source's advisory lock",
    statement: (sourceId) => [
      `select pg_advisory_xact_lock(hashtextextended('source:' || $1, 0))`,
      [sourceId],
    ],
  },
]

describe.skipIf(!databaseUrl).each(DRIVERS)('a lock held elsewhere, hot statements on %s', (driver) => {
  for (const lock of INBOUND_LOCKS) {
    test(`inbound POST behind ${lock.name}: 503 + Retry-After within the timeout, nothing written, stored once released`, async () => {
      const { app, ctx } = await appWithLockTimeout(driver)
      const { organization } = await createSignedInUser(ctx)
      const { source, apiKey } = await createSource(ctx, organization.id)
      // the source is in the replica's cache before the lock, as it is for a source in use
      expect((await post(app, apiKey, { email: uniqueEmail('warm') })).status).toBe(200)
      const address = uniqueEmail('locked')
      const [statement, params] = lock.statement(source.id)
      const release = await holdLock(statement, params)
      try {
        const started = performance.now()
        const response = await answeredWithin(
          post(app, apiKey, { email: address }),
          LOCK_TIMEOUT_MS + ANSWER_SLACK_MS,
        )
        expect(performance.now() - started).toBeGreaterThanOrEqual(LOCK_TIMEOUT_MS - 20)
        await expectLockRefusal(response)
        // readiness is the replica's, not a lock's
        const readiness = await app.handle(request('GET', '/readyz'))
        expect(readiness.status).toBe(200)
      } finally {
        await release()
      }
      const stored = () =>
        ctx.db.select({ id: leads.id }).from(leads).where(eq(leads.emailNormalized, address))
      expect(await stored()).toEqual([])
      const retried = await post(app, apiKey, { email: address })
      expect(retried.status).toBe(200)
      expect(await retried.json()).toMatchObject({ status: 'created', success: true })
      expect(await stored()).toHaveLength(1)
    }, 20_000)
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
        const response = await answeredWithin(
          call(app, token, 'GET', read.path(source.id)),
          LOCK_TIMEOUT_MS + ANSWER_SLACK_MS,
        )
        await expectLockRefusal(response)
      } finally {
        await release()
      }
      const after = await call(app, token, 'GET', read.path(source.id))
      expect(after.status).toBe(200)
    }, 20_000)
  }
})
