import { afterAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { sql } from 'drizzle-orm'
import { openDatabase } from '../../src/db/client'
import { runMigrations } from '../../src/db/migrate'
import {
  applyRepeatableMigrations,
  FUNCTIONS_FOLDER,
  readRepeatableMigrations,
} from '../../src/db/repeatable'
import { sqlRows } from '../../src/db/rows'
import { createMemoryLogger } from '../../src/lib/logger'
import { testConfig, testDatabase, usingRealServices } from '../helpers/test-app'

/**
 * drizzle/functions/: each SQL function and trigger in one file, applied after the versioned
 * migrations when its checksum changes. Runs on the suite's database (PostgreSQL when
 * DATABASE_URL is set, where concurrency is real) with functions of its own, named per test.
 */
const folders: string[] = []
const created: string[] = []

afterAll(async () => {
  const { db } = await testDatabase()
  for (const name of created) {
    await db.execute(sql.raw(`DROP FUNCTION IF EXISTS ${name}()`))
    await db.execute(sql`DELETE FROM drizzle.repeatable_migrations WHERE name = ${name}`)
  }
  for (const folder of folders) rmSync(folder, { recursive: true, force: true })
})

/** A folder holding one repeatable file: a function `name()` that returns `value`. */
function functionFile(value: number) {
  const folder = mkdtempSync(join(tmpdir(), 'repeatable-'))
  folders.push(folder)
  const name = `lc_test_${crypto.randomUUID().replaceAll('-', '')}`
  created.push(name)
  const write = (answer: number) =>
    writeFileSync(
      join(folder, `${name}.sql`),
      `-- a test function\nCREATE OR REPLACE FUNCTION ${name}() RETURNS integer LANGUAGE sql AS $$ SELECT ${answer} $$;\n`,
    )
  write(value)
  return { folder, name, write }
}

async function call(name: string): Promise<number> {
  const { db } = await testDatabase()
  const [row] = await sqlRows<{ value: number }>(db, sql.raw(`SELECT ${name}() AS value`))
  return row!.value
}

async function recordedChecksum(name: string): Promise<string | undefined> {
  const { db } = await testDatabase()
  const [row] = await sqlRows<{ checksum: string }>(
    db,
    sql`SELECT checksum FROM drizzle.repeatable_migrations WHERE name = ${name}`,
  )
  return row?.checksum
}

describe('repeatable migrations (drizzle/functions)', () => {
  test('a fresh database gets every function file applied after the versioned migrations, checksums recorded', async () => {
    const config = testConfig({ DATABASE_URL: '' })
    const fresh = await openDatabase(config, { inMemory: true })
    try {
      await runMigrations(config, fresh, createMemoryLogger('silent'))
      const files = readRepeatableMigrations(FUNCTIONS_FOLDER)
      expect(files.map((file) => file.name)).toContain('ingest_leads')
      const recorded = await sqlRows<{ name: string; checksum: string }>(
        fresh.db,
        sql`SELECT name, checksum FROM drizzle.repeatable_migrations ORDER BY name`,
      )
      expect(recorded).toEqual(files.map(({ name, checksum }) => ({ name, checksum })))
      // The live ingest_leads is the file's: the return type of drizzle/0011 with webhook_events,
      // grown with the key's window (0013: the file drops the older definition first).
      const [ingest] = await sqlRows<{ result: string }>(
        fresh.db,
        sql`SELECT pg_get_function_result('ingest_leads(jsonb)'::regprocedure) AS result`,
      )
      expect(ingest!.result).toBe(
        'TABLE(idx integer, lead_id uuid, outcome text, webhook_events boolean, remaining integer, reset_ms integer)',
      )
      const triggers = await sqlRows<{ tgname: string }>(
        fresh.db,
        sql`SELECT tgname FROM pg_trigger WHERE NOT tgisinternal ORDER BY tgname`,
      )
      expect(triggers.map((row) => row.tgname)).toEqual([
        'leads_keep_event_snapshot',
        'organizations_delete_leads',
        'webhook_endpoints_delete_deliveries',
        'webhook_sources_keep_event_names',
        'webhook_sources_release_rows',
        'webhook_sources_wait_for_writers',
      ])
      // A second start applies nothing.
      expect(await applyRepeatableMigrations(fresh.db)).toEqual({
        applied: [],
        unchanged: files.map((file) => file.name),
      })
    } finally {
      await fresh.close()
    }
  })

  test('a file is applied when new, re-applied when its checksum changes, skipped while unchanged', async () => {
    const { db } = await testDatabase()
    const file = functionFile(1)
    expect(await applyRepeatableMigrations(db, file.folder)).toEqual({ applied: [file.name], unchanged: [] })
    expect(await call(file.name)).toBe(1)
    const first = await recordedChecksum(file.name)

    // Unchanged: not run again, so a definition changed behind its back stays.
    await db.execute(
      sql.raw(`CREATE OR REPLACE FUNCTION ${file.name}() RETURNS integer LANGUAGE sql AS $$ SELECT 3 $$`),
    )
    expect(await applyRepeatableMigrations(db, file.folder)).toEqual({ applied: [], unchanged: [file.name] })
    expect(await call(file.name)).toBe(3)
    expect(await recordedChecksum(file.name)).toBe(first)

    // Edited: applied again, the new checksum recorded.
    file.write(2)
    expect(await applyRepeatableMigrations(db, file.folder)).toEqual({ applied: [file.name], unchanged: [] })
    expect(await call(file.name)).toBe(2)
    const second = await recordedChecksum(file.name)
    expect(second).not.toBe(first)
    expect(second).toBe(readRepeatableMigrations(file.folder)[0]!.checksum)
  })

  test('a file that fails rolls the whole run back: nothing recorded, the earlier file not applied', async () => {
    const { db } = await testDatabase()
    const file = functionFile(1)
    const broken = `zz_${file.name}`
    writeFileSync(join(file.folder, `${broken}.sql`), 'CREATE OR REPLACE FUNCTION broken( RETURNS;\n')
    await expect(applyRepeatableMigrations(db, file.folder)).rejects.toThrow()
    expect(await recordedChecksum(file.name)).toBeUndefined()
    expect(await recordedChecksum(broken)).toBeUndefined()
    await expect(call(file.name)).rejects.toThrow()
  })

  test(`concurrent starts do not fail: one applies, the others find the checksum recorded${usingRealServices ? '' : ' (PGlite: one connection)'}`, async () => {
    const { db } = await testDatabase()
    const file = functionFile(7)
    const results = await Promise.all([1, 2, 3].map(() => applyRepeatableMigrations(db, file.folder)))
    expect(results.filter((result) => result.applied.includes(file.name))).toHaveLength(1)
    expect(results.filter((result) => result.unchanged.includes(file.name))).toHaveLength(2)
    expect(await call(file.name)).toBe(7)
  })

  test.skipIf(!usingRealServices)(
    'concurrent runMigrations on PostgreSQL (each on its own connection) all succeed',
    async () => {
      const config = testConfig()
      const database = await testDatabase()
      const logger = createMemoryLogger('silent')
      await Promise.all([1, 2, 3].map(() => runMigrations(config, database, logger)))
      const files = readRepeatableMigrations(FUNCTIONS_FOLDER)
      for (const file of files) expect(await recordedChecksum(file.name)).toBe(file.checksum)
    },
  )
})
