import { describe, expect, test } from 'bun:test'
import { sql } from 'drizzle-orm'
import { DrizzleQueryError } from 'drizzle-orm/errors'
import { Elysia } from 'elysia'
import { describeDatabaseError } from '../../src/lib/errors'
import { RequestRegistry } from '../../src/lib/http'
import { DATABASE_UNAVAILABLE_HOLD_MS, healthModule } from '../../src/modules/health'
import { errorsPlugin } from '../../src/plugins/errors'
import { requestContextPlugin } from '../../src/plugins/request-context'
import { loggedLines, makeTestContext, request } from '../helpers/test-app'

/**
 * One description of a database error (src/lib/errors.ts describeDatabaseError): SQLSTATE,
 * message and statement, never the parameter values that Drizzle's "Failed query … params: …"
 * wrapper carries (lead personal data, key digests). It feeds the unhandled-error log, the start-up
 * failure message (test/reliability/postgres-exhausted.test.ts) and the 503 classification.
 */
describe('describeDatabaseError', () => {
  test('a real failed query: SQLSTATE, message and statement from the cause, no parameter value', async () => {
    const ctx = await makeTestContext()
    const marker = `lead-secret-${crypto.randomUUID()}`
    const error = await ctx.db.execute(sql`select ${marker}::int as n`).then(
      () => null,
      (caught: unknown) => caught,
    )
    expect(error).toBeInstanceOf(Error)
    // The wrapper itself does carry the value: that is what must never be logged.
    expect(String((error as Error).message)).toContain(marker)
    const description = describeDatabaseError(error)
    expect(description).toMatchObject({
      sqlstate: '22P02',
      message: 'invalid input syntax for type integer',
      statement: 'select $1::int as n',
      unavailable: false,
    })
    expect(JSON.stringify(description)).not.toContain(marker)
  })

  const unavailable: Array<[string, string]> = [
    ['53300', 'sorry, too many clients already'],
    ['57P01', 'terminating connection due to administrator command'],
    ['57P02', 'terminating connection due to crash of another server process'],
    ['57P03', 'the database system is starting up'],
    ['08006', 'connection failure'],
    ['08001', 'could not establish connection'],
    ['08P01', 'protocol violation'],
    ['CONNECT_TIMEOUT', 'write CONNECT_TIMEOUT 127.0.0.1:5432'],
    ['ECONNREFUSED', 'connect ECONNREFUSED 127.0.0.1:5432'],
    ['CONNECTION_CLOSED', 'write CONNECTION_CLOSED 127.0.0.1:5432'],
    ['55P03', 'canceling statement due to lock timeout'],
    ['ANSWER_TIMEOUT', 'the database did not answer within 15000 ms'],
    // a standby, a failover's old primary come back as one (database-read-only.test.ts)
    ['25006', 'cannot execute INSERT in a read-only transaction'],
    // class 53, insufficient resources: every one passes when the resource is back
    ['53100', 'could not extend file: No space left on device'],
    ['53200', 'out of memory'],
    ['53400', 'configuration limit exceeded'],
    ['57P05', 'terminating connection due to idle-session timeout'],
    // class 58, the server's own system error
    ['58030', 'could not read block 0 in file "base/1/2": read only 0 of 8192 bytes'],
    // a TLS handshake the client refused (DATABASE_URL's sslrootcert, database-url-forms.test.ts):
    // Bun.sql's and postgres.js' codes
    [
      'ERR_TLS_CERT_ALTNAME_INVALID',
      "Hostname/IP does not match certificate's altnames: IP: 127.0.0.2 is not in the cert's list",
    ],
    ['DEPTH_ZERO_SELF_SIGNED_CERT', 'self signed certificate'],
    ['UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'unable to verify the first certificate'],
    ['SELF_SIGNED_CERT_IN_CHAIN', 'self signed certificate in certificate chain'],
    ['CERT_HAS_EXPIRED', 'certificate has expired'],
    // rolled back for another transaction's sake: sent again, the request succeeds (a group of the
    // group commit is first written lead by lead, test/unit/group-commit-failures.test.ts)
    ['40001', 'could not serialize access due to concurrent update'],
    ['40P01', 'deadlock detected'],
    // statement_timeout (a role's, or DATABASE_URL's options) or an operator's cancel
    ['57014', 'canceling statement due to statement timeout'],
  ]
  const serviceable: Array<[string, string]> = [
    ['23505', 'duplicate key value violates unique constraint "leads_email_key"'],
    ['42P01', 'relation "nothing" does not exist'],
    // a deferred constraint: the same transaction fails the same way again
    ['40002', 'insert or update on table "leads" violates foreign key constraint'],
    ['57P04', 'database dropped'],
    ['22P02', 'invalid input syntax for type integer'],
  ]
  for (const [code, message] of [...unavailable, ...serviceable]) {
    const expected = unavailable.some(([candidate]) => candidate === code)
    test(`${code} inside Drizzle's wrapper: unavailable=${expected}, values never kept`, () => {
      const cause = Object.assign(new Error(message), { code, parameters: ['secret-value@example.com'] })
      const wrapped = new DrizzleQueryError(
        'insert into leads (email) values ($1)',
        ['secret-value@example.com'],
        cause,
      )
      const description = describeDatabaseError(wrapped)
      expect(description).toEqual({
        sqlstate: code,
        message,
        statement: 'insert into leads (email) values ($1)',
        unavailable: expected,
      })
      expect(JSON.stringify(description)).not.toContain('secret-value')
    })
  }

  test('not a database error: null', () => {
    expect(describeDatabaseError(new TypeError('x is not a function'))).toBeNull()
    expect(describeDatabaseError('text')).toBeNull()
  })
})

/** 503 `service_unavailable` with Retry-After and the request id: the answer to "cannot serve now". */
async function expectServiceUnavailable(response: Response) {
  expect(response.status).toBe(503)
  expect(response.headers.get('retry-after')).toBe('5')
  expect(await response.json()).toMatchObject({
    error: 'service_unavailable',
    request_id: expect.any(String),
  })
}

/** The errors plugin and the probes, with a route `/failing` that throws `error`. */
async function appFailingWith(error: Error) {
  const ctx = await makeTestContext()
  const registry = new RequestRegistry(ctx.config.trustProxy)
  const app = new Elysia()
    .use(requestContextPlugin(ctx, registry))
    .use(errorsPlugin(ctx, registry))
    .use(healthModule(ctx))
    .get('/failing', () => {
      throw error
    })
  return { ctx, app }
}

describe('the errors plugin uses it', () => {
  test('an unhandled query failure is logged with SQLSTATE and statement, never the parameter values', async () => {
    const ctx = await makeTestContext()
    const marker = `lead-secret-${crypto.randomUUID()}`
    const registry = new RequestRegistry(ctx.config.trustProxy)
    const app = new Elysia()
      .use(requestContextPlugin(ctx, registry))
      .use(errorsPlugin(ctx, registry))
      .get('/failing-query', async () => {
        await ctx.db.execute(sql`select ${marker}::int as n`)
        return 'unreachable'
      })
    const response = await app.handle(request('GET', '/failing-query'))
    expect(response.status).toBe(500)
    expect(await response.json()).toEqual({
      error: 'internal_error',
      message: 'an unexpected error occurred',
      request_id: response.headers.get('x-request-id'),
    })
    const lines = loggedLines(ctx)
    const logged = lines.find((line) => line.msg === 'unhandled error')
    expect(logged).toMatchObject({
      level: 'error',
      error: { sqlstate: '22P02', statement: 'select $1::int as n' },
    })
    expect(JSON.stringify(lines)).not.toContain(marker)
  })

  /**
   * The database is up and so is the replica: 503 + Retry-After (the same request succeeds later),
   * one log line at the level given, and /readyz stays 200 (taking replicas out of the balancer
   * would stop what still works). Before, the first three were 500 with an "unhandled error" line.
   */
  const refusedWhileUp: Array<[string, string, 'warn' | 'error', string]> = [
    [
      '40001',
      'could not serialize access due to concurrent update',
      'warn',
      'transaction rolled back for a concurrent one (serialization failure)',
    ],
    ['40P01', 'deadlock detected', 'error', 'transaction rolled back: deadlock with another one'],
    [
      '57014',
      'canceling statement due to statement timeout',
      'warn',
      'database statement cancelled (statement_timeout or an operator)',
    ],
    ['55P03', 'canceling statement due to lock timeout', 'warn', 'database lock wait timed out'],
    [
      '25006',
      'cannot execute INSERT in a read-only transaction',
      'error',
      'database takes no writes (read-only)',
    ],
  ]
  for (const [code, message, level, line] of refusedWhileUp) {
    test(`${code} (${message}): 503 + Retry-After, "${line}" at ${level}, the replica stays ready`, async () => {
      const { ctx, app } = await appFailingWith(
        new DrizzleQueryError(
          'update members set role = $1',
          ['owner'],
          Object.assign(new Error(message), { code }),
        ),
      )
      const response = await app.handle(request('GET', '/failing'))
      await expectServiceUnavailable(response)
      expect((await app.handle(request('GET', '/readyz'))).status).toBe(200)
      const lines = loggedLines(ctx).filter((entry) => entry.level === 'error' || entry.level === 'warn')
      expect(lines).toHaveLength(1)
      expect(lines[0]).toMatchObject({
        level,
        msg: line,
        error: { sqlstate: code, message, statement: 'update members set role = $1' },
      })
    })
  }

  test('"server cannot serve now" (53300 in Drizzle\'s wrapper) is 503 + Retry-After and /readyz 503 for a while', async () => {
    const { app } = await appFailingWith(
      new DrizzleQueryError(
        'select 1',
        [],
        Object.assign(new Error('sorry, too many clients already'), { code: '53300' }),
      ),
    )
    expect((await app.handle(request('GET', '/readyz'))).status).toBe(200)
    const response = await app.handle(request('GET', '/failing'))
    await expectServiceUnavailable(response)
    const readiness = await app.handle(request('GET', '/readyz'))
    expect(readiness.status).toBe(503)
    expect(await readiness.json()).toMatchObject({ status: 'not_ready', database: { status: 'down' } })
    // Ready again by itself once such refusals stop.
    await Bun.sleep(DATABASE_UNAVAILABLE_HOLD_MS + 200)
    expect((await app.handle(request('GET', '/readyz'))).status).toBe(200)
  }, 15_000)
})
