import { describe, expect, test } from 'bun:test'
import postgres from 'postgres'
import {
  type DatabaseWrites,
  databaseWrites,
  databaseWritesPerRequest,
  describeDatabaseWrites,
} from '../../bench/support'

/**
 * `bun run bench:ingest` prints beside every level what the PostgreSQL server wrote per request
 * (bench/support.ts, docs/benchmarks.md A42): WAL bytes and records, full-page images and buffers
 * the backends wrote out themselves, from the server's counters read before and after the level.
 */
const reading = (walBytes: number, walRecords: number, walFullPages: number, buffersByBackends: number) =>
  ({ walBytes, walRecords, walFullPages, buffersByBackends }) satisfies DatabaseWrites

describe('databaseWritesPerRequest', () => {
  test.each([
    [
      'the service at a level: ~1.6 kB and ~12 records a request, a few full pages and backend writes',
      reading(4_727_191_618, 31_338_142, 100_385, 755_985),
      reading(4_727_191_618 + 40_000 * 1_611, 31_338_142 + 463_000, 100_385 + 18, 755_985 + 4_524),
      40_000,
      {
        walBytesPerRequest: 1_611,
        walRecordsPerRequest: 11.6,
        walFullPagesPer1000: 0.5,
        backendWritesPer1000: 113.1,
      },
    ],
    [
      'a handler: one row and its key',
      reading(0, 0, 0, 0),
      reading(43_000, 300, 0, 4),
      100,
      { walBytesPerRequest: 430, walRecordsPerRequest: 3, walFullPagesPer1000: 0, backendWritesPer1000: 40 },
    ],
    [
      'no request answered (a level that failed): zeros, not a division by zero',
      reading(10, 10, 10, 10),
      reading(500, 20, 12, 11),
      0,
      { walBytesPerRequest: 0, walRecordsPerRequest: 0, walFullPagesPer1000: 0, backendWritesPer1000: 0 },
    ],
  ])('%s', (_name, before, after, requests, expected) => {
    expect(databaseWritesPerRequest(before, after, requests)).toEqual(expected)
  })
})

describe('describeDatabaseWrites', () => {
  test('the line names every figure with its unit', () => {
    expect(
      describeDatabaseWrites({
        walBytesPerRequest: 1_611,
        walRecordsPerRequest: 11.6,
        walFullPagesPer1000: 0.5,
        backendWritesPer1000: 113.1,
      }),
    ).toBe('WAL 1,611 B / 11.6 records a request, full pages 0.5‰, written by backends 113.1‰')
  })

  test('a server without the counters says so instead of printing zeros', () => {
    expect(describeDatabaseWrites(undefined)).toBe('database writes not read')
  })
})

/** A stand-in for a postgres.js connection that answers the one query with `answer`. */
function fakeSql(answer: () => Promise<unknown[]>): postgres.Sql {
  return ((..._args: unknown[]) => answer()) as unknown as postgres.Sql
}

describe('databaseWrites', () => {
  test('reads the counters, which PostgreSQL returns as bigint text, as numbers', async () => {
    const sql = fakeSql(async () => [
      { walBytes: '4727191618', walRecords: '31338142', walFullPages: '100385', buffersByBackends: '755985' },
    ])
    expect(await databaseWrites(sql)).toEqual(reading(4_727_191_618, 31_338_142, 100_385, 755_985))
  })

  test('a server before PostgreSQL 14 (no pg_stat_wal) gives null; any other failure is thrown', async () => {
    const missing = Object.assign(new Error('relation "pg_stat_wal" does not exist'), { code: '42P01' })
    expect(await databaseWrites(fakeSql(() => Promise.reject(missing)))).toBeNull()
    const refused = Object.assign(new Error('connection refused'), { code: 'ECONNREFUSED' })
    await expect(databaseWrites(fakeSql(() => Promise.reject(refused)))).rejects.toThrow('connection refused')
  })

  test.skipIf(!process.env.DATABASE_URL)(
    'on the real server: numbers, and the WAL position moves with a write',
    async () => {
      const sql = postgres(process.env.DATABASE_URL!, { max: 1, onnotice: () => {} })
      try {
        const before = await databaseWrites(sql)
        expect(before).not.toBeNull()
        for (const value of Object.values(before!)) expect(Number.isFinite(value) && value >= 0).toBe(true)
        const table = sql(`bench_database_writes_probe_${Date.now().toString(36)}`)
        await sql`create table ${table} (n integer)`
        await sql`insert into ${table} select generate_series(1, 1000)`
        await sql`drop table ${table}`
        const after = await databaseWrites(sql)
        // ~1,000 heap records of at least 30 bytes; the statistics' counters may report a second later
        expect(after!.walBytes - before!.walBytes).toBeGreaterThan(30_000)
        expect(after!.walRecords).toBeGreaterThanOrEqual(before!.walRecords)
      } finally {
        await sql.end()
      }
    },
  )
})
