import { afterAll, describe, expect, test } from 'bun:test'
import { sql } from 'drizzle-orm'
import { type Config, loadConfig } from '../../src/config'
import { type DatabaseHandle, openDatabase, splitPool } from '../../src/db/client'
import { sqlRows } from '../../src/db/rows'
import { isUniqueViolation } from '../../src/db/unique-violation'
import { describeDatabaseError, isDatabaseUnavailable } from '../../src/lib/errors'

/**
 * `DatabaseHandle.query` answers the same on both values of DATABASE_DRIVER (docs/benchmarks.md,
 * "The client switches"): JSON text bound to `$n::jsonb` is the document it holds (Bun.sql alone
 * would store a jsonb string), array parameters work, and errors read as postgres.js errors do
 * (SQLSTATE, constraint, statement, 503 classification). The rest of the suite runs on either driver
 * through DATABASE_DRIVER; this file checks both in every PostgreSQL run.
 */
const databaseUrl = process.env.DATABASE_URL
const DRIVERS = ['postgres-js', 'bun-sql'] as const
const opened: DatabaseHandle[] = []
afterAll(async () => {
  for (const handle of opened) await handle.close()
})

function config(driver: Config['databaseDriver'], url = databaseUrl!, pipeline = false): Config {
  return loadConfig({
    DATABASE_URL: url,
    DATABASE_DRIVER: driver,
    DATABASE_POOL_SIZE: '3',
    INGEST_PIPELINE: String(pipeline),
    LOG_LEVEL: 'silent',
  })
}

async function open(driver: Config['databaseDriver']): Promise<DatabaseHandle> {
  const handle = await openDatabase(config(driver))
  opened.push(handle)
  return handle
}

describe.skipIf(!databaseUrl).each(DRIVERS)('DatabaseHandle.query on %s', (driver) => {
  test('JSON text bound to $1::jsonb is the document; arrays and scalars come back typed', async () => {
    const database = await open(driver)
    const [row] = await database.query<{
      kind: string
      first: number
      tags: string[]
      n: number
      ok: boolean
    }>(
      `select jsonb_typeof($1::jsonb) as kind, ($1::jsonb -> 0 ->> 'a')::int as first,
        $2::text[] as tags, $3::int as n, $4::boolean as ok`,
      [JSON.stringify([{ a: 7 }]), ['x', 'y'], 42, true],
    )
    expect(row).toEqual({ kind: 'array', first: 7, tags: ['x', 'y'], n: 42, ok: true })
    const [scalarsOnly] = await database.query<{ kind: string; text: string | null }>(
      'select jsonb_typeof($1::jsonb) as kind, $2::text as text',
      [JSON.stringify({ a: 1 }), null],
    )
    expect(scalarsOnly).toEqual({ kind: 'object', text: null })
  })

  test('a unique violation names its constraint; the statement is kept, never the values', async () => {
    const database = await open(driver)
    const table = `driver_check_${driver.replace('-', '_')}_${crypto.randomUUID().slice(0, 8)}`
    await database.query(`create table ${table} (id text constraint ${table}_pkey primary key)`, [])
    const marker = `secret-${crypto.randomUUID()}`
    try {
      await database.query(`insert into ${table} (id) values ($1)`, [marker])
      const error = await database.query(`insert into ${table} (id) values ($1)`, [marker]).then(
        () => null,
        (caught: unknown) => caught,
      )
      expect(isUniqueViolation(error, `${table}_pkey`)).toBe(true)
      expect(isUniqueViolation(error, 'another_constraint')).toBe(false)
      const description = describeDatabaseError(error)
      expect(description).toMatchObject({
        sqlstate: '23505',
        unavailable: false,
        statement: `insert into ${table} (id) values ($1)`,
      })
      expect(JSON.stringify(description)).not.toContain(marker)
    } finally {
      await database.query(`drop table ${table}`, [])
    }
  })

  const failures: Array<[string, string, string]> = [
    ['division by zero', 'select 1 / $1::int as n', '22012'],
    ['an undefined function', 'select no_such_function($1::int)', '42883'],
  ]
  test.each(failures)('%s: its SQLSTATE, answered 500 not 503', async (_name, text, sqlstate) => {
    const database = await open(driver)
    const error = await database.query(text, [0]).then(
      () => null,
      (caught: unknown) => caught,
    )
    expect(describeDatabaseError(error)).toMatchObject({ sqlstate, unavailable: false, statement: text })
    expect(isDatabaseUnavailable(error)).toBe(false)
  })

  test('no server listening: "cannot serve now" (503), on the statement path and the ping', async () => {
    const url = new URL(databaseUrl!)
    url.port = '1'
    const database = await openDatabase(config(driver, url.toString()))
    opened.push(database)
    for (const attempt of [() => database.query('select $1::int as n', [1]), () => database.ping()]) {
      const error = await attempt().then(
        () => null,
        (caught: unknown) => caught,
      )
      expect(isDatabaseUnavailable(error)).toBe(true)
    }
  })
})

// DATABASE_LOCK_TIMEOUT_MS (src/db/client.ts connectionSettings): every pool the service opens on
// PostgreSQL starts its connections with it, whichever client a statement takes
// (test/integration/database-lock-waits.test.ts has what it does to a request).
describe.skipIf(!databaseUrl).each(DRIVERS)('session settings with %s', (driver) => {
  test.each([
    ['1234', '1234ms'],
    ['0', '0'],
  ])(
    'DATABASE_LOCK_TIMEOUT_MS=%p: lock_timeout %p on the hot statements, Drizzle, the pipeline and a connection of its own',
    async (value, shown) => {
      const database = await openDatabase(
        loadConfig({
          DATABASE_URL: databaseUrl,
          DATABASE_DRIVER: driver,
          DATABASE_POOL_SIZE: '3',
          INGEST_PIPELINE: 'true',
          DATABASE_LOCK_TIMEOUT_MS: value,
          LOG_LEVEL: 'silent',
        }),
      )
      opened.push(database)
      const text = `select current_setting('lock_timeout') as lock_timeout, current_setting('application_name') as app, $1::int as n`
      const expected = { lock_timeout: shown, app: 'lead-capture', n: 1 }
      expect(await database.query(text, [1])).toEqual([expected])
      expect(await database.pipeline!.query(text, [1])).toEqual([expected])
      const [viaDrizzle] = await sqlRows<{ lock_timeout: string; app: string }>(
        database.db,
        sql`select current_setting('lock_timeout') as lock_timeout, current_setting('application_name') as app`,
      )
      expect(viaDrizzle).toEqual({ lock_timeout: shown, app: 'lead-capture' })
      // a connection of its own (the log retention's), named after its work
      const session = database.openSession('settings-check')!
      try {
        const [own] = await sqlRows<{ lock_timeout: string; app: string }>(
          session.db,
          sql`select current_setting('lock_timeout') as lock_timeout, current_setting('application_name') as app`,
        )
        expect(own).toEqual({ lock_timeout: shown, app: 'lead-capture-settings-check' })
      } finally {
        await session.end()
      }
    },
  )
})

// The group commit's own connection (src/db/client.ts): postgres.js writes a statement sent while
// another runs at once, so the server starts it the moment the first ends, whatever this process
// is doing; each statement is its own transaction, answered on its own.
describe.skipIf(!databaseUrl).each(DRIVERS)('DatabaseHandle.pipeline with %s', (driver) => {
  async function pipelineOf(url = databaseUrl!) {
    const handle = await openDatabase(config(driver, url, true))
    opened.push(handle)
    expect(handle.pipeline).not.toBeNull()
    return handle.pipeline!
  }

  test('JSON text bound to $1::jsonb is the document, also when sent before the first is described', async () => {
    const pipeline = await pipelineOf()
    const text = `select jsonb_typeof($1::jsonb) as kind, jsonb_array_length($1::jsonb) as n, $2::int as i`
    // Five at once on a fresh connection: the later ones are written while the first is described.
    const rows = await Promise.all(
      [1, 2, 3, 4, 5].map((i) =>
        pipeline.query<{ kind: string; n: number; i: number }>(text, [
          JSON.stringify(Array(i).fill({ a: i })),
          i,
        ]),
      ),
    )
    expect(rows.map(([row]) => row)).toEqual([1, 2, 3, 4, 5].map((i) => ({ kind: 'array', n: i, i })))
  })

  test('a statement sent while another runs starts when it ends, not when this process reads the answer', async () => {
    const pipeline = await pipelineOf()
    const epochMs = 'extract(epoch from clock_timestamp())::float8 * 1000'
    const sleeping = `select pg_sleep($1::float8), ${epochMs} as ended`
    const stamping = `select ${epochMs} as started where $1::int = 1`
    // Prepared first, as the group commit's one statement is after its first group: postgres.js
    // sends nothing behind a statement it is still describing.
    await pipeline.query(sleeping, [0])
    await pipeline.query(stamping, [1])
    const first = pipeline.query<{ ended: number }>(sleeping, [0.3])
    const second = pipeline.query<{ started: number }>(stamping, [1])
    // The event loop is busy for a second from the first's start: the first's answer is read only
    // after that, so a client that waits for it before writing the second starts it ~0.7 s late.
    await new Promise<void>((resolve) =>
      setTimeout(() => {
        const until = Date.now() + 1000
        while (Date.now() < until) {}
        resolve()
      }, 20),
    )
    const [[ended], [started]] = await Promise.all([first, second])
    expect(started!.started - ended!.ended).toBeGreaterThanOrEqual(0)
    expect(started!.started - ended!.ended).toBeLessThan(300)
  })

  test('a failed statement fails alone: the one pipelined behind it commits and answers', async () => {
    const pipeline = await pipelineOf()
    await pipeline.query('select 1 / $1::int as n', [1])
    await pipeline.query('select $1::int + 1 as n', [0])
    const failing = pipeline.query('select 1 / $1::int as n', [0]).then(
      () => null,
      (caught: unknown) => caught,
    )
    const next = pipeline.query<{ n: number }>('select $1::int + 1 as n', [41])
    const error = await failing
    expect(describeDatabaseError(error)).toMatchObject({ sqlstate: '22012', unavailable: false })
    expect(await next).toEqual([{ n: 42 }])
  })

  test('no server listening: "cannot serve now" (503)', async () => {
    const url = new URL(databaseUrl!)
    url.port = '1'
    const pipeline = await pipelineOf(url.toString())
    const error = await pipeline.query('select $1::int as n', [1]).then(
      () => null,
      (caught: unknown) => caught,
    )
    expect(isDatabaseUnavailable(error)).toBe(true)
  })
})

describe('the pool split', () => {
  // With INGEST_PIPELINE, from 3 up, one connection is the group commit's own; bun-sql keeps a third
  // (at least one) for postgres.js, the rest is Bun.sql's; postgres-js keeps the rest for postgres.js.
  const cases: Array<
    [
      driver: Config['databaseDriver'],
      pipeline: boolean,
      poolSize: number,
      postgresJs: number,
      bunSql: number,
      groupCommit: number,
    ]
  > = [
    ['bun-sql', false, 2, 1, 1, 0],
    ['bun-sql', false, 3, 1, 2, 0],
    ['bun-sql', false, 10, 3, 7, 0],
    ['bun-sql', false, 17, 5, 12, 0],
    ['bun-sql', true, 2, 1, 1, 0],
    ['bun-sql', true, 3, 1, 1, 1],
    ['bun-sql', true, 4, 1, 2, 1],
    ['bun-sql', true, 6, 2, 3, 1],
    ['bun-sql', true, 10, 3, 6, 1],
    ['bun-sql', true, 17, 5, 11, 1],
    ['postgres-js', false, 10, 10, 0, 0],
    ['postgres-js', true, 1, 1, 0, 0],
    ['postgres-js', true, 2, 2, 0, 0],
    ['postgres-js', true, 3, 2, 0, 1],
    ['postgres-js', true, 10, 9, 0, 1],
  ]
  test.each(cases)(
    '%s, INGEST_PIPELINE %p, DATABASE_POOL_SIZE=%i: postgres.js %i + Bun.sql %i + the group commit %i',
    (driver, pipeline, size, postgresJs, bunSql, groupCommit) => {
      expect(splitPool(size, driver, pipeline)).toEqual({ postgresJs, bunSql, groupCommit })
      expect(postgresJs + bunSql + groupCommit).toBe(size)
    },
  )

  test.skipIf(!databaseUrl).each([
    ['postgres-js', false, 3, 3, false],
    ['bun-sql', false, 10, 7, false],
    ['postgres-js', true, 2, 2, false],
    ['postgres-js', true, 3, 2, true],
    ['bun-sql', true, 3, 1, true],
    ['postgres-js', true, 10, 9, true],
    ['bun-sql', true, 10, 6, true],
  ] as const)(
    '%s, INGEST_PIPELINE %p, a pool of %i: %i hot statements at once; its own group-commit connection: %p',
    async (driver, pipeline, size, concurrency, own) => {
      const handle = await openDatabase(
        loadConfig({
          DATABASE_URL: databaseUrl,
          DATABASE_DRIVER: driver,
          DATABASE_POOL_SIZE: String(size),
          INGEST_PIPELINE: String(pipeline),
          LOG_LEVEL: 'silent',
        }),
      )
      opened.push(handle)
      expect(handle.queryConcurrency).toBe(concurrency)
      expect(handle.pipeline !== null).toBe(own)
    },
  )

  test.skipIf(Boolean(databaseUrl))('PGlite runs one statement at a time', async () => {
    const handle = await openDatabase(loadConfig({ LOG_LEVEL: 'silent' }), { inMemory: true })
    opened.push(handle)
    expect(handle.queryConcurrency).toBe(1)
    expect(handle.pipeline).toBeNull()
  })

  test('a pool of 1 cannot be split: start-up names the variable', () => {
    expect(() => loadConfig({ DATABASE_DRIVER: 'bun-sql', DATABASE_POOL_SIZE: '1' })).toThrow(
      /DATABASE_DRIVER/,
    )
  })
})
