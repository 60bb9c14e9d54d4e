import { createHash } from 'node:crypto'
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { sql } from 'drizzle-orm'
import { type SqlExecutor, sqlRows } from './rows'

/**
 * Repeatable migrations (Flyway's `R__` files): every SQL function and trigger has one source file
 * in `drizzle/functions/`, its current definition. The versioned migrations in `drizzle/` are the
 * history (already applied in deployments, never edited); after them, each file whose checksum
 * differs from the one recorded at its last application is run again. A reader finds the live
 * `ingest_leads()` in one place; a change to it is an edit of that file, reviewed as a diff.
 */
export const FUNCTIONS_FOLDER = fileURLToPath(new URL('../../drizzle/functions', import.meta.url))

// Any constant works; it only has to be the same in every replica (and differ from migrate.ts's).
const REPEATABLE_LOCK_ID = 7_364_521_002

/** Statements of a file are separated as drizzle-kit separates those of a migration. */
const STATEMENT_BREAKPOINT = '--> statement-breakpoint'

export interface RepeatableMigration {
  /** The file name without `.sql`, the key of its recorded checksum. */
  name: string
  statements: string[]
  /** SHA-256 of the file's bytes: any edit, comments included, applies the file again. */
  checksum: string
}

export interface RepeatableResult {
  applied: string[]
  unchanged: string[]
}

/** The files of `folder`, in name order (Flyway applies repeatables by description too). */
export function readRepeatableMigrations(folder = FUNCTIONS_FOLDER): RepeatableMigration[] {
  return readdirSync(folder)
    .filter((file) => file.endsWith('.sql'))
    .sort()
    .map((file) => {
      const text = readFileSync(join(folder, file), 'utf8')
      return {
        name: file.slice(0, -'.sql'.length),
        statements: text
          .split(STATEMENT_BREAKPOINT)
          .map((statement) => statement.trim())
          .filter((statement) => statement !== ''),
        checksum: createHash('sha256').update(text).digest('hex'),
      }
    })
}

/** Something that runs a callback in one transaction: Drizzle's database on either driver. */
export interface TransactionRunner {
  transaction<T>(run: (tx: SqlExecutor) => Promise<T>): Promise<T>
}

/**
 * Applies the changed files of `folder` in one transaction under a transaction-level advisory
 * lock: replicas starting together wait for each other, and the second finds every checksum
 * recorded (two concurrent CREATE OR REPLACE of one function fail with "tuple concurrently
 * updated"). A file that fails rolls back every file of the run and stops start-up.
 */
export async function applyRepeatableMigrations(
  db: TransactionRunner,
  folder = FUNCTIONS_FOLDER,
): Promise<RepeatableResult> {
  const migrations = readRepeatableMigrations(folder)
  return db.transaction(async (tx) => {
    await tx.execute(sql`SELECT pg_advisory_xact_lock(${REPEATABLE_LOCK_ID})`)
    // Beside drizzle's own journal (drizzle.__drizzle_migrations), out of the application's schema.
    await tx.execute(sql`CREATE SCHEMA IF NOT EXISTS drizzle`)
    await tx.execute(
      sql`CREATE TABLE IF NOT EXISTS drizzle.repeatable_migrations (
        name text PRIMARY KEY, checksum text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`,
    )
    const recorded = new Map(
      (
        await sqlRows<{ name: string; checksum: string }>(
          tx,
          sql`SELECT name, checksum FROM drizzle.repeatable_migrations`,
        )
      ).map((row) => [row.name, row.checksum]),
    )
    const result: RepeatableResult = { applied: [], unchanged: [] }
    for (const migration of migrations) {
      if (recorded.get(migration.name) === migration.checksum) {
        result.unchanged.push(migration.name)
        continue
      }
      for (const statement of migration.statements) await tx.execute(sql.raw(statement))
      await tx.execute(
        sql`INSERT INTO drizzle.repeatable_migrations (name, checksum) VALUES (${migration.name}, ${migration.checksum})
            ON CONFLICT (name) DO UPDATE SET checksum = excluded.checksum, applied_at = now()`,
      )
      result.applied.push(migration.name)
    }
    return result
  })
}
