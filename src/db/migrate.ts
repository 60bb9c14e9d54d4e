import { fileURLToPath } from 'node:url'
import { sql } from 'drizzle-orm'
import { drizzle as drizzlePostgres } from 'drizzle-orm/postgres-js'
import { migrate as migratePostgres } from 'drizzle-orm/postgres-js/migrator'
import postgres from 'postgres'
import type { Config } from '../config'
import type { Logger } from '../lib/logger'
import type { DatabaseHandle } from './client'
import { parseDatabaseUrl, postgresJsConnection, startupOptions } from './database-url'
import { applyRepeatableMigrations, type RepeatableResult } from './repeatable'

export const MIGRATIONS_FOLDER = fileURLToPath(new URL('../../drizzle', import.meta.url))

// Any constant works; it only has to be the same in every replica.
const MIGRATION_LOCK_ID = 7_364_521_001

/**
 * Applies pending migrations from `drizzle/`, then the repeatable ones of `drizzle/functions/` whose
 * checksum changed (src/db/repeatable.ts). On PostgreSQL a session-level advisory lock on a
 * dedicated connection serialises replicas that start at the same moment: the second waits, then
 * finds nothing left to apply.
 */
export async function runMigrations(config: Config, handle: DatabaseHandle, logger: Logger): Promise<void> {
  const started = performance.now()
  let functions: RepeatableResult
  if (handle.engine === 'pglite' || !config.databaseUrl) {
    const { migrate: migratePglite } = await import('drizzle-orm/pglite/migrator')
    await migratePglite(handle.db as never, { migrationsFolder: MIGRATIONS_FOLDER })
    functions = await applyRepeatableMigrations(handle.db)
  } else {
    const target = parseDatabaseUrl(config.databaseUrl)
    const client = postgres({
      ...postgresJsConnection(target),
      connection: startupOptions(target),
      max: 1,
      onnotice: () => {},
      connect_timeout: 5,
    })
    try {
      const db = drizzlePostgres(client)
      await db.execute(sql`select pg_advisory_lock(${MIGRATION_LOCK_ID})`)
      try {
        await migratePostgres(db, { migrationsFolder: MIGRATIONS_FOLDER })
        functions = await applyRepeatableMigrations(db)
      } finally {
        await db.execute(sql`select pg_advisory_unlock(${MIGRATION_LOCK_ID})`)
      }
    } finally {
      await client.end({ timeout: 5 })
    }
  }
  logger.info('migrations applied', {
    functions_applied: functions.applied,
    duration_ms: Math.round(performance.now() - started),
  })
}
