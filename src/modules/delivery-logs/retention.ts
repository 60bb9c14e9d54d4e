import { type SQL, sql } from 'drizzle-orm'
import { drizzle } from 'drizzle-orm/postgres-js'
import postgres from 'postgres'
import type { AppContext } from '../../context'
import { sqlRows } from '../../db/rows'

const DAY_MS = 24 * 3_600_000
export const PURGE_BATCH_SIZE = 5000
// Any constant works; it only has to be the same in every replica.
const PURGE_LOCK_ID = 7_364_521_102

export interface PurgeResult {
  /** False when another replica held the lock: it is purging, this one skipped. */
  ran: boolean
  deletedLogs: number
  deletedRollupRows: number
  cutoff: string
}

type Run = (query: SQL) => Promise<Array<{ deleted: number }>>

/**
 * Deletes delivery-log entries received before `now - LOG_RETENTION_DAYS`, and roll-up hours that
 * ended before then. Bounded batches (one short statement each, using the received_at index) keep
 * locks and WAL bursts small on a table with millions of rows. On PostgreSQL one replica purges at a
 * time: a session-level advisory lock on a dedicated connection is held for the whole run (the
 * batches commit one by one, so no long transaction holds back vacuum). PGlite is one process.
 */
export async function purgeExpiredLogs(
  ctx: AppContext,
  now = ctx.clock.now(),
  options: { shouldStop?: () => boolean } = {},
): Promise<PurgeResult> {
  const cutoff = new Date(now - ctx.config.logRetentionDays * DAY_MS).toISOString()
  if (ctx.database.engine === 'pglite' || !ctx.config.databaseUrl) {
    const run: Run = (query) => sqlRows(ctx.db, query)
    return { ran: true, cutoff, ...(await purge(ctx, run, cutoff, options)) }
  }
  const client = postgres(ctx.config.databaseUrl, {
    max: 1,
    onnotice: () => {},
    connect_timeout: 5,
    connection: { application_name: 'lead-capture-retention' },
  })
  try {
    // Its own connection, so the session lock and the batches share it.
    const db = drizzle(client)
    const [lock] = await sqlRows<{ locked: boolean }>(
      db,
      sql`SELECT pg_try_advisory_lock(${PURGE_LOCK_ID}) AS locked`,
    )
    if (!lock?.locked) {
      ctx.logger.debug('log retention: another replica is purging')
      return { ran: false, deletedLogs: 0, deletedRollupRows: 0, cutoff }
    }
    try {
      const run: Run = (query) => sqlRows(db, query)
      return { ran: true, cutoff, ...(await purge(ctx, run, cutoff, options)) }
    } finally {
      await db.execute(sql`SELECT pg_advisory_unlock(${PURGE_LOCK_ID})`)
    }
  } finally {
    await client.end({ timeout: 5 })
  }
}

async function purge(ctx: AppContext, run: Run, cutoff: string, options: { shouldStop?: () => boolean }) {
  const started = performance.now()
  let deletedLogs = 0
  for (let batch = 1; !options.shouldStop?.(); batch++) {
    const [row] = await run(
      sql`WITH gone AS (
         DELETE FROM delivery_logs WHERE id IN (
           SELECT id FROM delivery_logs WHERE received_at < ${cutoff}::timestamptz LIMIT ${PURGE_BATCH_SIZE})
         RETURNING 1)
       SELECT count(*)::int AS deleted FROM gone`,
    )
    const deleted = Number(row?.deleted ?? 0)
    deletedLogs += deleted
    if (deleted > 0) {
      ctx.logger.info('log retention: batch deleted', { batch, deleted, deleted_so_far: deletedLogs, cutoff })
    }
    if (deleted < PURGE_BATCH_SIZE) break
  }
  let deletedRollupRows = 0
  for (const table of [sql`delivery_log_hourly`, sql`delivery_log_latency_hourly`]) {
    const [row] = await run(
      sql`WITH gone AS (DELETE FROM ${table} WHERE hour < date_trunc('hour', ${cutoff}::timestamptz, 'UTC') RETURNING 1)
       SELECT count(*)::int AS deleted FROM gone`,
    )
    deletedRollupRows += Number(row?.deleted ?? 0)
  }
  if (deletedLogs > 0 || deletedRollupRows > 0) {
    ctx.logger.info('log retention: done', {
      deleted_logs: deletedLogs,
      deleted_rollup_rows: deletedRollupRows,
      cutoff,
      duration_ms: Math.round(performance.now() - started),
    })
  }
  return { deletedLogs, deletedRollupRows }
}
