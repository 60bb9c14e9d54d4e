import { sql } from 'drizzle-orm'
import type { AppContext } from '../../context'
import { sqlRows } from '../../db/rows'
import { ENTRIES_BY_OUTCOME_SQL, LATENCY_BUCKET_SQL } from './repository'

/**
 * Rows are folded into the roll-up only once they are this old: the inbound path stamps
 * `received_at` before it commits, and aggregated 429 rows are written up to a second later, so a
 * row can appear a little after its `received_at`. Health stays exact in between (the live part).
 */
export const ROLLUP_DELAY_MS = 2 * 60_000
// A source seen for the first time is rolled up from here on: health never reads older hours.
const FIRST_ROLLUP_HOURS = 25
// Any constant works; it only has to be the same in every replica.
const ROLLUP_LOCK_ID = 7_364_521_101

/**
 * Folds the delivery logs of every source from its watermark up to `now - ROLLUP_DELAY_MS` into the
 * hourly tables, and moves the watermarks, in one statement. A LATERAL probe per source keeps each
 * run to index range scans of the new rows only. Increments are added (ON CONFLICT ... + excluded),
 * so the transaction-scoped advisory lock makes sure two replicas never add the same rows twice;
 * the second simply skips this run.
 */
export const ROLLUP_SQL = (target: string) => sql`
WITH bounds AS (
  SELECT s.id AS source_id,
         greatest(coalesce(w.rolled_until, '-infinity'::timestamptz),
                  date_trunc('hour', ${target}::timestamptz - make_interval(hours => ${FIRST_ROLLUP_HOURS}), 'UTC')) AS from_at
  FROM webhook_sources s LEFT JOIN delivery_log_rollup_watermarks w ON w.source_id = s.id
), fresh AS MATERIALIZED (
  SELECT l.*
  FROM bounds b
  CROSS JOIN LATERAL (
    SELECT d.source_id, date_trunc('hour', d.received_at, 'UTC') AS hour, d.outcome, d.http_status,
           coalesce(d.reason, '') AS reason, d.repeat_count, d.duration_ms
    FROM ${ENTRIES_BY_OUTCOME_SQL(
      sql`d.source_id, d.received_at, d.outcome, d.http_status, d.reason, d.repeat_count, d.duration_ms`,
      sql`d.source_id = b.source_id AND d.received_at >= b.from_at AND d.received_at < ${target}::timestamptz`,
    )} AS d
    -- OFFSET 0 keeps the probe per source: pulled up into a join, it was planned as a hash join
    -- over a scan of the whole table where the planner could not tell how few rows are new.
    OFFSET 0
  ) l
), counts AS (
  INSERT INTO delivery_log_hourly AS h (source_id, hour, outcome, http_status, reason, requests)
  SELECT source_id, hour, outcome, http_status, reason, sum(repeat_count) FROM fresh
  GROUP BY source_id, hour, outcome, http_status, reason
  ON CONFLICT (source_id, hour, outcome, http_status, reason) DO UPDATE SET requests = h.requests + excluded.requests
  RETURNING source_id
), latency AS (
  INSERT INTO delivery_log_latency_hourly AS h (source_id, hour, bucket, requests)
  SELECT source_id, hour, ${LATENCY_BUCKET_SQL('duration_ms')}, sum(repeat_count) FROM fresh
  WHERE http_status <> 429
  GROUP BY 1, 2, 3
  ON CONFLICT (source_id, hour, bucket) DO UPDATE SET requests = h.requests + excluded.requests
  RETURNING 1
), marks AS (
  INSERT INTO delivery_log_rollup_watermarks AS m (source_id, rolled_until)
  SELECT DISTINCT source_id, ${target}::timestamptz FROM counts
  ON CONFLICT (source_id) DO UPDATE SET rolled_until = greatest(m.rolled_until, excluded.rolled_until)
  RETURNING 1
)
SELECT (SELECT count(*) FROM fresh)::int AS log_rows, (SELECT count(*) FROM marks)::int AS sources,
       (SELECT count(*) FROM latency)::int AS latency_rows`

export interface RollupResult {
  ran: boolean
  logRows: number
  sources: number
}

export async function rollupDeliveryLogs(ctx: AppContext, now = ctx.clock.now()): Promise<RollupResult> {
  const target = new Date(now - ROLLUP_DELAY_MS).toISOString()
  const started = performance.now()
  const result = await ctx.db.transaction(async (tx) => {
    const [lock] = await sqlRows<{ locked: boolean }>(
      tx,
      sql`SELECT pg_try_advisory_xact_lock(${ROLLUP_LOCK_ID}) AS locked`,
    )
    if (!lock?.locked) return { ran: false, logRows: 0, sources: 0 }
    const [row] = await sqlRows<{ log_rows: number; sources: number }>(tx, ROLLUP_SQL(target))
    return { ran: true, logRows: row?.log_rows ?? 0, sources: row?.sources ?? 0 }
  })
  if (result.ran && result.logRows > 0) {
    ctx.logger.debug('delivery logs rolled up', {
      log_rows: result.logRows,
      sources: result.sources,
      until: target,
      duration_ms: Math.round(performance.now() - started),
    })
  }
  return result
}
