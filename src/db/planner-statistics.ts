import { sql } from 'drizzle-orm'
import type { AppContext } from '../context'
import { sqlRows } from './rows'

/**
 * Tables written on every inbound request: leads and delivery_logs, whose lookups are planned once
 * per connection; and webhook_deliveries where endpoints take lead events (a row per lead, claimed
 * and updated by the delivery worker's statements, planned at every call).
 */
export const HOT_TABLES = ['leads', 'delivery_logs', 'webhook_deliveries'] as const
export const STATISTICS_CHECK_INTERVAL_MS = 2_000
/** Below this many pages any plan is cheap; statistics of a handful of rows would mislead anyway. */
const MIN_PAGES = 8

// `autovacuum`: whether the server's autovacuum would analyse this table (the server setting, the
// statistics it needs, and the table's own `autovacuum_enabled`). A PostgreSQL can run with it off
// (some managed and benchmark set-ups do); then this job is what keeps the statistics current.
const SIZES_SQL = (
  tables: string,
) => sql`SELECT c.relname AS table, c.reltuples::float8 AS reltuples, c.relpages AS relpages,
  (pg_relation_size(c.oid) / current_setting('block_size')::int)::int AS pages,
  (current_setting('autovacuum') = 'on' AND current_setting('track_counts') = 'on'
    AND coalesce((SELECT o.option_value FROM pg_options_to_table(c.reloptions) o
                  WHERE o.option_name = 'autovacuum_enabled'), 'on') IN ('on', 'true', 'yes', '1')) AS autovacuum
FROM pg_class c WHERE c.oid = ANY(${tables}::regclass[])`

export interface TableSize {
  table: string
  /** -1 until the table is first analysed or vacuumed */
  reltuples: number
  /** pages when the statistics were taken */
  relpages: number
  /** pages now */
  pages: number
  /** whether autovacuum analyses this table (never on PGlite, which has none) */
  autovacuum: boolean
}

/**
 * What the planner knows of each hot table against its real size now. Through Drizzle's pool, as
 * the ANALYZE below, not the hot statements' Bun.sql pool: a job's statement whose server vanished
 * is found there (src/db/renewable-pool.ts) and fails, where on Bun.sql it waited until TCP gave up,
 * holding the job's next runs and the replica's shutdown (test/integration/database-pool-renewal.test.ts).
 */
export async function hotTableSizes(ctx: AppContext): Promise<TableSize[]> {
  const sizes = await sqlRows<TableSize>(ctx.db, SIZES_SQL(`{${HOT_TABLES.join(',')}}`))
  // PGlite reports the setting but runs no autovacuum process.
  const pglite = ctx.database.engine === 'pglite'
  return sizes.map((size) => ({ ...size, autovacuum: !pglite && size.autovacuum === true }))
}

/**
 * A table with no statistics yet; without autovacuum (PGlite, or a PostgreSQL where it is off), also
 * one twice the size it had when they were taken. Where autovacuum runs it re-analyses every 10% of growth on its own, and an
 * extra ANALYZE would only add work (and a round of re-planning) in the middle of traffic.
 */
export function needsStatistics(
  { reltuples, relpages, pages }: Omit<TableSize, 'autovacuum'>,
  { autovacuum }: { autovacuum: boolean },
): boolean {
  if (pages < MIN_PAGES) return false
  return reltuples < 0 || (!autovacuum && pages >= 2 * Math.max(relpages, 1))
}

/**
 * Keeps the planner's statistics of the hot tables in step with their growth, where autovacuum does
 * not: on a new database it first looks after a minute (`autovacuum_naptime`), PGlite has no
 * autovacuum at all, and a PostgreSQL may run with it off (this machine's benchmark server does). Each connection plans ingest_leads once, at its sixth call; a plan made while
 * `leads` had a few hundred rows and no statistics looked e-mails up through (organization_id, id),
 * walking every lead of the organization, and stayed in use as the table grew (measured: 5,600 →
 * 1,500 leads/s within 15 s of a fresh start). ANALYZE invalidates those cached plans, so the
 * next ones are made with the real sizes. The check is one catalog query every 2 s; ANALYZE runs
 * only as `needsStatistics` says. Returns the tables analysed.
 */
export async function refreshPlannerStatistics(ctx: AppContext): Promise<string[]> {
  const sizes = await hotTableSizes(ctx)
  const stale = sizes.filter((size) => needsStatistics(size, size))
  for (const { table, pages } of stale) {
    const started = performance.now()
    // Table names come from HOT_TABLES, never from input.
    await ctx.db.execute(sql.raw(`ANALYZE ${table}`))
    ctx.logger.info('planner statistics refreshed', {
      table,
      pages,
      duration_ms: Math.round(performance.now() - started),
    })
  }
  return stale.map(({ table }) => table)
}
