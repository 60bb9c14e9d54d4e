import { afterAll, describe, expect, test } from 'bun:test'
import postgres from 'postgres'
import type { Config } from '../../src/config'
import { type DatabaseHandle, openDatabase } from '../../src/db/client'
import { expectServiceUnavailable } from '../helpers/bounded-answers'
import { createSignedInUser, createSource } from '../helpers/factories'
import { email, post } from '../helpers/inbound'
import { call, loggedLines, makeTestApp, request, testConfig } from '../helpers/test-app'

/**
 * A database that takes no writes: a standby, a failover whose old primary came back as one, a host
 * name that still points at it. Every write fails with SQLSTATE 25006 (read_only_sql_transaction),
 * which was answered 500 internal_error (the webhook POST included: a sender that gives up on 5xx
 * but retries 503 lost the lead). Now each write is answered 503 with Retry-After, reads are
 * answered as usual, /readyz stays 200 (the replica's reads still work; the database is up) and the
 * error log says `database takes no writes (read-only)`. The replica's sessions are made read-only by
 * a role of this file's own (`default_transaction_read_only` on the role), as a standby's are.
 */
const databaseUrl = process.env.DATABASE_URL
const ROLE = 'lead_capture_read_only_test'
const READ_ONLY_LINE = 'database takes no writes (read-only)'
const RECONNECTING = 'database: the server takes no writes; connecting again'

const opened: DatabaseHandle[] = []
afterAll(async () => {
  for (const handle of opened) await handle.close()
  if (!databaseUrl) return
  const admin = postgres(databaseUrl, { max: 1, onnotice: () => {} })
  await admin.unsafe(`drop owned by ${ROLE}; drop role ${ROLE}`).catch(() => {})
  await admin.end({ timeout: 5 })
})

/** The role's new sessions read-only (a standby's), or taking writes (the primary's). */
async function setRoleReadOnly(readOnly: boolean): Promise<void> {
  const admin = postgres(databaseUrl!, { max: 1, onnotice: () => {} })
  try {
    await admin.unsafe(`alter role ${ROLE} set default_transaction_read_only = ${readOnly ? 'on' : 'off'}`)
  } finally {
    await admin.end({ timeout: 5 })
  }
}

async function readOnlyUrl(): Promise<string> {
  const admin = postgres(databaseUrl!, { max: 1, onnotice: () => {} })
  try {
    await admin.unsafe(
      `do $$ begin if not exists (select 1 from pg_roles where rolname = '${ROLE}') then create role ${ROLE} login; end if; end $$`,
    )
    await admin.unsafe(`grant usage on schema public to ${ROLE};
      grant all on all tables in schema public to ${ROLE};
      grant all on all sequences in schema public to ${ROLE};
      grant execute on all functions in schema public to ${ROLE}`)
  } finally {
    await admin.end({ timeout: 5 })
  }
  await setRoleReadOnly(true)
  const url = new URL(databaseUrl!)
  url.username = ROLE
  url.password = ''
  return url.toString()
}

describe.skipIf(!databaseUrl).each(['bun-sql', 'postgres-js'] as const)(
  'a database that takes no writes, hot statements on %s',
  (driver) => {
    test('every write is answered 503 with Retry-After, reads 200, /readyz 200, one error line each', async () => {
      // What the requests need, written while the database takes writes.
      const { ctx: writer } = await makeTestApp()
      const { organization, token } = await createSignedInUser(writer)
      const { source, apiKey } = await createSource(writer, organization.id)

      const env = { DATABASE_URL: await readOnlyUrl(), DATABASE_DRIVER: driver }
      const database = await openDatabase(testConfig(env))
      opened.push(database)
      const { app, ctx } = await makeTestApp({ env: env as Partial<Record<keyof Config, string>>, database })

      const writes: Array<[string, () => Promise<Response>]> = [
        ['a webhook POST of a new lead', () => post(app, apiKey, { email: email() })],
        ['a webhook POST without contact (its log entry)', () => post(app, apiKey, { first_name: 'Ada' })],
        ['creating a source', () => call(app, token, 'POST', '/api/webhook/sources', { name: 'Read-only' })],
        [
          'sign-up',
          () =>
            app.handle(
              request('POST', '/api/auth/signup', {
                json: {
                  email: email(),
                  password: 'correct horse battery staple',
                  organization_name: 'Acme Ltd',
                },
              }),
            ),
        ],
      ]
      for (const [, write] of writes) await expectServiceUnavailable(await write())
      expect(loggedLines(ctx).filter((line) => line.msg === READ_ONLY_LINE)).toEqual(
        writes.map(() =>
          expect.objectContaining({ level: 'error', error: expect.objectContaining({ sqlstate: '25006' }) }),
        ),
      )

      const list = await call(app, token, 'GET', '/api/webhook/sources')
      expect(list.status).toBe(200)
      expect((await list.json()).data.map((row: { id: string }) => row.id)).toEqual([source.id])
      const ready = await app.handle(request('GET', '/readyz'))
      expect(ready.status).toBe(200)
    }, 30_000)

    // The failover done: the host the replica connects to takes writes again, but the connections it
    // holds are sessions of the standby (here: of a read-only role) until they are replaced.
    test('once the server takes writes again, the next write is stored: the refusal made every pool connect again', async () => {
      const { ctx: writer } = await makeTestApp()
      const { organization, token } = await createSignedInUser(writer)
      const { apiKey } = await createSource(writer, organization.id)
      const env = { DATABASE_URL: await readOnlyUrl(), DATABASE_DRIVER: driver }
      const database = await openDatabase(testConfig(env))
      opened.push(database)
      const { app, ctx } = await makeTestApp({ env: env as Partial<Record<keyof Config, string>>, database })
      // Both pools hold a connection to the read-only server: the source lookup (Drizzle's) and the
      // group commit's.
      await expectServiceUnavailable(await post(app, apiKey, { email: email() }))
      expect(loggedLines(ctx).filter((line) => line.msg === RECONNECTING)).toEqual([
        expect.objectContaining({ level: 'error', next_at_most_in_ms: 5_000 }),
      ])

      await setRoleReadOnly(false)
      const stored = await post(app, apiKey, { email: email() })
      expect(stored.status).toBe(200)
      expect(await stored.json()).toEqual(expect.objectContaining({ status: 'created', success: true }))
      const created = await call(app, token, 'POST', '/api/webhook/sources', { name: 'After the failover' })
      expect(created.status).toBe(201)
    }, 30_000)
  },
)
