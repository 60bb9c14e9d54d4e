import { type SQL, sql } from 'drizzle-orm'
import type { AppContext } from '../../context'
import { sqlRows } from '../../db/rows'
import { ENTRIES_BY_OUTCOME_SQL } from './repository'

const DAY_MS = 24 * 3_600_000
export const PURGE_BATCH_SIZE = 5000
/** Sources probed per statement for expired entries (their ids in order, a cursor between chunks). */
export const PURGE_SOURCES_PER_CHUNK = 1000
// Any constant works; it only has to be the same in every replica.
const PURGE_LOCK_ID = 7_364_521_102

export interface PurgeResult {
  /** False when another replica held the lock: it is purging, this one skipped. */
  ran: boolean
  deletedLogs: number
  deletedRollupRows: number
  cutoff: string
}

type Run = (query: SQL) => Promise<Array<{ deleted: number; last_source?: string | null }>>

export interface PurgeOptions {
  shouldStop?: () => boolean
  /** PURGE_SOURCES_PER_CHUNK unless a test walks the chunks with fewer sources. */
  sourcesPerChunk?: number
}

/**
 * Deletes delivery-log entries received before `now - LOG_RETENTION_DAYS`, and roll-up hours that
 * ended before then. Bounded batches (one short statement each) keep locks and WAL bursts small on a
 * table with millions of rows. The expired entries are found source by source on
 * `(source_id, outcome, received_at)`, the index every log read uses (one range per outcome): an
 * index on `received_at` alone served only this hourly job and cost every lead an index entry (~5%
 * of PostgreSQL's CPU per lead at groups of 40, docs/benchmarks.md "Where issue [7] stands";
 * dropped by drizzle/0022). Every entry
 * belongs to a source (a source's deletion deletes its entries: webhook_sources_release_rows), so
 * walking the sources finds them all. On PostgreSQL one replica purges at a
 * time: a session-level advisory lock on a connection of its own (DatabaseHandle.openSession: the
 * pools' lock_timeout, and a statement whose server vanished fails instead of holding the run and
 * the replica's shutdown until TCP gives up) is held for the whole run (the batches commit one by
 * one, so no long transaction holds back vacuum). PGlite is one process.
 */
export async function purgeExpiredLogs(
  ctx: AppContext,
  now = ctx.clock.now(),
  options: PurgeOptions = {},
): Promise<PurgeResult> {
  const cutoff = new Date(now - ctx.config.logRetentionDays * DAY_MS).toISOString()
  const session = ctx.database.openSession('retention')
  if (!session) {
    const run: Run = (query) => sqlRows(ctx.db, query)
    return { ran: true, cutoff, ...(await purge(ctx, run, cutoff, options)) }
  }
  try {
    // Its own connection, so the session lock and the batches share it.
    const { db } = session
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
      // A connection that lost its server took the lock with its session, and ending the session
      // releases it anyway: a failed unlock changes nothing, and the run's own error is the one to report.
      await db.execute(sql`SELECT pg_advisory_unlock(${PURGE_LOCK_ID})`).catch(() => {})
    }
  } finally {
    await session.end()
  }
}

/**
 * One batch: up to PURGE_BATCH_SIZE expired entries of the chunk of sources after `after`. The ids
 * as an array, deleted by primary key: `id IN (SELECT …)` was planned as a hash join against a
 * sequential scan of the whole table (the batch's LIMIT taken as its size).
 */
export const PURGE_BATCH_SQL = (after: string, cutoff: string, sourcesPerChunk: number) =>
  sql`WITH chunk AS (
         SELECT id FROM webhook_sources WHERE id > ${after}::uuid ORDER BY id LIMIT ${sourcesPerChunk}),
       gone AS (
         DELETE FROM delivery_logs WHERE id = ANY(ARRAY(
           SELECT d.id FROM chunk s CROSS JOIN LATERAL (
             SELECT e.id FROM ${ENTRIES_BY_OUTCOME_SQL(
               sql`d.id`,
               sql`d.source_id = s.id AND d.received_at < ${cutoff}::timestamptz`,
             )} AS e LIMIT ${PURGE_BATCH_SIZE}) d
           LIMIT ${PURGE_BATCH_SIZE}))
         RETURNING 1)
       SELECT (SELECT count(*)::int FROM gone) AS deleted,
         (SELECT id::text FROM chunk ORDER BY id DESC LIMIT 1) AS last_source`

async function purge(ctx: AppContext, run: Run, cutoff: string, options: PurgeOptions) {
  const started = performance.now()
  const sourcesPerChunk = options.sourcesPerChunk ?? PURGE_SOURCES_PER_CHUNK
  let deletedLogs = 0
  // The chunk's sources are those after `after` in id order; a full batch may have left expired
  // entries in them, so the same chunk goes again until a batch comes back short, then the next.
  let after = '00000000-0000-0000-0000-000000000000'
  for (let batch = 1; !options.shouldStop?.(); batch++) {
    const [row] = await run(PURGE_BATCH_SQL(after, cutoff, sourcesPerChunk))
    const deleted = Number(row?.deleted ?? 0)
    deletedLogs += deleted
    if (deleted > 0) {
      ctx.logger.info('log retention: batch deleted', { batch, deleted, deleted_so_far: deletedLogs, cutoff })
    }
    if (deleted === PURGE_BATCH_SIZE) continue
    if (!row?.last_source) break
    after = row.last_source
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
