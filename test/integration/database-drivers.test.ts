import { afterAll, describe, expect, test } from 'bun:test'
import { type Config, loadConfig } from '../../src/config'
import { type DatabaseHandle, openDatabase, splitPool } from '../../src/db/client'
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

function config(driver: Config['databaseDriver'], url = databaseUrl!): Config {
  return loadConfig({
    DATABASE_URL: url,
    DATABASE_DRIVER: driver,
    DATABASE_POOL_SIZE: '3',
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

describe('the pool split of DATABASE_DRIVER=bun-sql', () => {
  const cases: Array<[poolSize: number, postgresJs: number, bunSql: number]> = [
    [2, 1, 1],
    [3, 1, 2],
    [4, 1, 3],
    [6, 2, 4],
    [10, 3, 7],
    [17, 5, 12],
  ]
  test.each(cases)('DATABASE_POOL_SIZE=%i: postgres.js %i + Bun.sql %i, the same total', (size, pg, bun) => {
    expect(splitPool(size)).toEqual({ postgresJs: pg, bunSql: bun })
  })

  test.skipIf(!databaseUrl).each([
    ['postgres-js', 3, 3],
    ['bun-sql', 3, 2],
    ['postgres-js', 10, 10],
    ['bun-sql', 10, 7],
  ] as const)(
    '%s with a pool of %i runs %i hot statements at once (the group commit sends no more groups)',
    async (driver, size, concurrency) => {
      const handle = await openDatabase(
        loadConfig({
          DATABASE_URL: databaseUrl,
          DATABASE_DRIVER: driver,
          DATABASE_POOL_SIZE: String(size),
          LOG_LEVEL: 'silent',
        }),
      )
      opened.push(handle)
      expect(handle.queryConcurrency).toBe(concurrency)
    },
  )

  test.skipIf(Boolean(databaseUrl))('PGlite runs one statement at a time', async () => {
    const handle = await openDatabase(loadConfig({ LOG_LEVEL: 'silent' }), { inMemory: true })
    opened.push(handle)
    expect(handle.queryConcurrency).toBe(1)
  })

  test('a pool of 1 cannot be split: start-up names the variable', () => {
    expect(() => loadConfig({ DATABASE_DRIVER: 'bun-sql', DATABASE_POOL_SIZE: '1' })).toThrow(
      /DATABASE_DRIVER/,
    )
  })
})
