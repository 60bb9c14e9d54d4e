import { and, eq, type SQL, sql } from 'drizzle-orm'
import type { AppContext } from '../../context'
import { sqlRows } from '../../db/rows'
import { webhookSources } from '../../db/schema'
import { OUTCOMES, type Outcome, outcomesWithStatus } from './model'

/**
 * Latency histogram bucket of a duration in ms: b such that duration is in (2^((b-1)/8), 2^(b/8)],
 * clamped to [0.01 ms, 131 s] (float8 math: numeric log is several times slower). One expression, used by the roll-up and by the live query, so
 * both halves of the health view bucket alike.
 */
export const LATENCY_BUCKET_SQL = (column: string) =>
  sql`least(greatest(ceil(8 * ln(greatest(${sql.identifier(column)}, 0.01)::float8) / ln(2::float8)), -53), 136)::int`

/** Upper bound (ms) of a latency bucket. */
export function bucketUpperBoundMs(bucket: number): number {
  return 2 ** (bucket / 8)
}

/**
 * Every outcome, as a constant array (the planner sees its five elements). The one per-source index
 * is (source_id, outcome, received_at DESC NULLS LAST, id DESC NULLS LAST), so a read across
 * outcomes names them all, one index range per outcome (NEWEST_SQL, ENTRIES_BY_OUTCOME_SQL;
 * drizzle/0023), where without them PostgreSQL 15 could only walk the whole source. The column's
 * CHECK keeps the list complete.
 */
export const EVERY_OUTCOME_SQL = sql.raw(`'{${OUTCOMES.join(',')}}'::text[]`)

/**
 * `columns` of the entries `where` (on `d`) selects, read one outcome at a time: for each outcome an
 * index range on (source_id, outcome, received_at), whatever the statistics say. Written as
 * `outcome = ANY(every outcome)`, the planner chose by the statistics whether to put the outcome in
 * the index condition: where most sources hold few entries (a shared database with many small
 * sources) it judged one descent and a walk of the source cheaper than five descents, and walked a
 * source of millions whole (three reads failed delivery-log-reads.test.ts in CI, 2026-11-28). An
 * equality leaves no such choice; OFFSET 0 keeps each probe a probe (pulled up into a join, the
 * roll-up's was planned as a hash join over the whole table). A FROM item: alias it.
 */
export const ENTRIES_BY_OUTCOME_SQL = (columns: SQL, where: SQL) => sql`(SELECT e.*
  FROM unnest(${EVERY_OUTCOME_SQL}) AS o(outcome)
  CROSS JOIN LATERAL (SELECT ${columns} FROM delivery_logs d WHERE d.outcome = o.outcome AND ${where} OFFSET 0) e)`

/**
 * A source's newest entries matching `where` (on `d`), newest first: the newest `limit` of each
 * outcome, one index range each, merged and cut at `limit`. At most five ranges of `limit` entries,
 * however many the source has. Each row also carries `sort_at` and `sort_id`, the order's keys.
 * Each range is read in the index's own order, from its newest end, and stops at the limit: NULLS
 * LAST as the index was built (plain DESC means NULLS FIRST, an order the index does not have, and
 * PostgreSQL read and sorted the whole range for it, NOT NULL columns or not), and qualified (a bare
 * `id` would be the columns' `id::text AS id`, an order no index has).
 */
const NEWEST_SQL = (
  columns: SQL,
  where: SQL,
  limit: number,
  outcomes: SQL = EVERY_OUTCOME_SQL,
) => sql`SELECT n.*
FROM unnest(${outcomes}) AS o(outcome)
CROSS JOIN LATERAL (
  SELECT ${columns}, received_at AS sort_at, id AS sort_id FROM delivery_logs d
  WHERE d.outcome = o.outcome AND ${where}
  ORDER BY d.received_at DESC NULLS LAST, d.id DESC NULLS LAST LIMIT ${limit}
) n
ORDER BY n.sort_at DESC, n.sort_id DESC LIMIT ${limit}`

const outcomeList = (outcomes: readonly Outcome[]) => sql`${sql.param(outcomes)}::text[]`

export interface LogRow {
  id: string
  /** received_at to the microsecond, ISO 8601 UTC: the keyset cursor must not lose precision. */
  received_at_text: string
  method: string
  http_status: number
  outcome: Outcome
  reason: string | null
  lead_id: string | null
  client_ip: string | null
  origin: string | null
  user_agent: string | null
  body_bytes: number
  body_truncated: boolean
  spam_reasons: string[] | string
  duration_ms: number
  repeat_count: number
}

// Casts keep the row shape identical on postgres.js and PGlite (no bigint/float4/Date surprises).
const ENTRY_COLUMNS = sql`id::text AS id,
  to_char(received_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS received_at_text,
  method, http_status::int AS http_status, outcome, reason, lead_id::text AS lead_id, client_ip, origin,
  user_agent, body_bytes, body_truncated, spam_reasons, round(duration_ms::numeric, 2)::float8 AS duration_ms,
  repeat_count`

export interface LogFilter {
  sourceId: string
  limit: number
  outcome?: Outcome
  status?: number
  since?: string
  until?: string
  after?: { receivedAt: string; id: string }
}

export interface AggregateRow {
  kind: 'count' | 'latency'
  hour_ms: number | null
  outcome: Outcome | null
  http_status: number | null
  reason: string | null
  bucket: number | null
  requests: number
}

export interface RecentRow {
  outcome: Outcome
  http_status: number
  reason: string | null
  repeat_count: number
  at_ms: number
}

/**
 * The window's counts and latency histogram in one round trip: roll-up rows for what the roll-up
 * job has covered (received_at < the source's watermark), plus a live aggregate of the rows after
 * it (normally the last few minutes). Exact whatever the job's lag: a lagging job only makes the
 * live part longer.
 */
const AGGREGATE_SQL = (sourceId: string, from: string, to: string) => sql`WITH live AS MATERIALIZED (
  SELECT date_trunc('hour', received_at, 'UTC') AS hour, outcome, http_status, coalesce(reason, '') AS reason,
         repeat_count, duration_ms
  FROM ${ENTRIES_BY_OUTCOME_SQL(
    sql`d.received_at, d.outcome, d.http_status, d.reason, d.repeat_count, d.duration_ms`,
    sql`d.source_id = ${sourceId} AND d.received_at < ${to}::timestamptz
      AND d.received_at >= greatest(${from}::timestamptz,
        coalesce((SELECT rolled_until FROM delivery_log_rollup_watermarks WHERE source_id = ${sourceId}), '-infinity'))`,
  )} AS l
)
SELECT 'count' AS kind, (extract(epoch FROM hour) * 1000)::float8 AS hour_ms, outcome, http_status::int AS http_status,
       reason, NULL::int AS bucket, requests::int AS requests
FROM delivery_log_hourly WHERE source_id = ${sourceId} AND hour >= ${from}::timestamptz AND hour < ${to}::timestamptz
UNION ALL
SELECT 'count', (extract(epoch FROM hour) * 1000)::float8, outcome, http_status::int, reason, NULL, sum(repeat_count)::int
FROM live GROUP BY hour, outcome, http_status, reason
UNION ALL
SELECT 'latency', NULL, NULL, NULL, NULL, bucket::int, requests::int
FROM delivery_log_latency_hourly WHERE source_id = ${sourceId} AND hour >= ${from}::timestamptz AND hour < ${to}::timestamptz
UNION ALL
SELECT 'latency', NULL, NULL, NULL, NULL, ${LATENCY_BUCKET_SQL('duration_ms')}, sum(repeat_count)::int
FROM live WHERE http_status <> 429 GROUP BY 6`

// The newest rows of any age: the status rules look at the latest requests.
const RECENT_SQL = (sourceId: string, limit: number) =>
  NEWEST_SQL(
    sql`outcome, http_status::int AS http_status, reason, repeat_count,
      (extract(epoch FROM received_at) * 1000)::float8 AS at_ms`,
    sql`d.source_id = ${sourceId}`,
    limit,
  )

// One index probe per outcome on (source_id, outcome, received_at desc, id desc), in the index's
// order (NULLS LAST, as in NEWEST_SQL).
const LATEST_BY_OUTCOME_SQL = (sourceId: string, outcomes: readonly Outcome[]) => sql`SELECT o.outcome,
  l.http_status, l.reason, l.repeat_count, l.at_ms
FROM unnest(${outcomeList(outcomes)}) AS o(outcome)
CROSS JOIN LATERAL (
  SELECT http_status::int AS http_status, reason, repeat_count,
         (extract(epoch FROM received_at) * 1000)::float8 AS at_ms
  FROM delivery_logs d WHERE d.source_id = ${sourceId} AND d.outcome = o.outcome
  ORDER BY received_at DESC NULLS LAST, id DESC NULLS LAST LIMIT 1
) l`

const LATEST_PROBLEMS_SQL = (sourceId: string, outcomes: readonly Outcome[], limit: number) =>
  NEWEST_SQL(ENTRY_COLUMNS, sql`d.source_id = ${sourceId}`, limit, outcomeList(outcomes))

/**
 * A page of the log list, newest first, keyset on (received_at, id): one index range per outcome
 * (one when the filter names an outcome), however far back the page is. A status filter reads only
 * the outcomes that status can have (outcomesWithStatus): the status is not in the index, and every
 * other outcome's range was walked whole for it (`?status=429` on a source of 1,000,000 entries:
 * 78,843 pages, ~450 ms). Within those ranges it still reads until it has a page: a status other than
 * 200 that few entries have walks the source's `rejected` entries (docs/api.md).
 */
const LIST_SQL = (filter: LogFilter) => {
  const where: SQL[] = [sql`d.source_id = ${filter.sourceId}`]
  if (filter.status !== undefined) where.push(sql`d.http_status = ${filter.status}`)
  if (filter.since) where.push(sql`d.received_at >= ${filter.since}::timestamptz`)
  if (filter.until) where.push(sql`d.received_at < ${filter.until}::timestamptz`)
  if (filter.after) {
    where.push(
      sql`(d.received_at, d.id) < (${filter.after.receivedAt}::timestamptz, ${filter.after.id}::uuid)`,
    )
  }
  return NEWEST_SQL(ENTRY_COLUMNS, sql.join(where, sql` AND `), filter.limit, outcomesOfList(filter))
}

/** The outcomes a list reads: the one it names, those its status can have, both, or every one. */
function outcomesOfList(filter: LogFilter): SQL {
  if (filter.status === undefined) return filter.outcome ? outcomeList([filter.outcome]) : EVERY_OUTCOME_SQL
  const possible = outcomesWithStatus(filter.status)
  return outcomeList(filter.outcome ? possible.filter((outcome) => outcome === filter.outcome) : possible)
}

export interface StatusInputRow {
  source_id: string
  enabled: boolean
  requests: number
  successes: number
  latest_count: number
  latest_failures: number
  leading_failures: number
  latest_failed: boolean
}

/**
 * What the status rules read, per source, for many sources in one statement: the window's request
 * and success counts (roll-up hours before the watermark plus the live rows after it, exactly as
 * AGGREGATE_SQL) and the latest requests (the newest `recent` rows in the window, each weighted by
 * repeat_count, cut at `recent` requests: `before` is how many requests newer rows stand for).
 */
const STATUS_INPUTS_SQL = (
  sourceIds: readonly string[],
  from: string,
  to: string,
  outcomes: { success: readonly Outcome[]; failure: readonly Outcome[]; recent: number; leading: number },
) => sql`SELECT s.id::text AS source_id, s.enabled,
  (coalesce(h.requests, 0) + coalesce(l.requests, 0))::int AS requests,
  (coalesce(h.successes, 0) + coalesce(l.successes, 0))::int AS successes,
  r.latest_count, r.latest_failures, r.leading_failures, r.latest_failed
FROM webhook_sources s
CROSS JOIN LATERAL (
  SELECT sum(requests) AS requests,
         sum(requests) FILTER (WHERE outcome = ANY(${outcomeList(outcomes.success)})) AS successes
  FROM delivery_log_hourly WHERE source_id = s.id AND hour >= ${from}::timestamptz AND hour < ${to}::timestamptz
) h
CROSS JOIN LATERAL (
  SELECT sum(repeat_count) AS requests,
         sum(repeat_count) FILTER (WHERE outcome = ANY(${outcomeList(outcomes.success)})) AS successes
  FROM ${ENTRIES_BY_OUTCOME_SQL(
    sql`d.outcome, d.repeat_count`,
    sql`d.source_id = s.id AND d.received_at < ${to}::timestamptz
      AND d.received_at >= greatest(${from}::timestamptz,
        coalesce((SELECT rolled_until FROM delivery_log_rollup_watermarks w WHERE w.source_id = s.id), '-infinity'))`,
  )} AS live
) l
CROSS JOIN LATERAL (
  SELECT coalesce(sum(least(rc, ${outcomes.recent} - before)), 0)::int AS latest_count,
         coalesce(sum(least(rc, ${outcomes.recent} - before)) FILTER (WHERE failed), 0)::int AS latest_failures,
         coalesce(sum(least(rc, ${outcomes.leading} - before)) FILTER (WHERE failed AND before < ${outcomes.leading}), 0)::int
           AS leading_failures,
         coalesce(bool_or(failed) FILTER (WHERE before = 0 AND rc > 0), false) AS latest_failed
  FROM (
    SELECT failed, rc, coalesce(sum(rc) OVER (ORDER BY received_at DESC, id DESC
             ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS before
    FROM (
      SELECT outcome = ANY(${outcomeList(outcomes.failure)}) AS failed, repeat_count AS rc,
             sort_at AS received_at, sort_id AS id
      FROM (${NEWEST_SQL(sql`outcome, repeat_count`, sql`d.source_id = s.id`, outcomes.recent)}) latest
    ) newest
    WHERE received_at >= ${from}::timestamptz
  ) weighted
  WHERE before < ${outcomes.recent}
) r
WHERE s.id = ANY(${sql.param(sourceIds)}::uuid[])`

/** The statements of the repository's reads, for the tests that check how much of a source each reads. */
export const DELIVERY_LOG_READS = {
  list: LIST_SQL,
  aggregates: AGGREGATE_SQL,
  recent: RECENT_SQL,
  latestByOutcome: LATEST_BY_OUTCOME_SQL,
  latestProblems: LATEST_PROBLEMS_SQL,
  statusInputs: STATUS_INPUTS_SQL,
}

/**
 * Reads of the delivery logs. The health queries are roll-ups the query builder cannot express
 * (UNION ALL of hourly tables and a live aggregate, LATERAL probes per outcome): Drizzle `sql`
 * templates, run through sqlRows. The entry columns are cast in SQL so both drivers return the
 * same shapes (microsecond timestamps as text for the keyset cursor).
 */
export class DeliveryLogsRepository {
  constructor(private readonly ctx: AppContext) {}

  async findSource(sourceId: string, organizationId: string): Promise<{ enabled: boolean } | null> {
    const [row] = await this.ctx.db
      .select({ enabled: webhookSources.enabled })
      .from(webhookSources)
      .where(and(eq(webhookSources.id, sourceId), eq(webhookSources.organizationId, organizationId)))
    return row ?? null
  }

  list(filter: LogFilter): Promise<LogRow[]> {
    return sqlRows<LogRow>(this.ctx.db, LIST_SQL(filter))
  }

  async get(sourceId: string, logId: string): Promise<(LogRow & { body: string | null }) | null> {
    const [row] = await sqlRows<LogRow & { body: string | null }>(
      this.ctx.db,
      sql`SELECT ${ENTRY_COLUMNS}, body FROM delivery_logs WHERE source_id = ${sourceId} AND id = ${logId}`,
    )
    return row ?? null
  }

  aggregates(sourceId: string, from: Date, to: Date): Promise<AggregateRow[]> {
    return sqlRows<AggregateRow>(this.ctx.db, AGGREGATE_SQL(sourceId, from.toISOString(), to.toISOString()))
  }

  recent(sourceId: string, limit: number): Promise<RecentRow[]> {
    return sqlRows<RecentRow>(this.ctx.db, RECENT_SQL(sourceId, limit))
  }

  latestByOutcome(sourceId: string, outcomes: readonly Outcome[]): Promise<RecentRow[]> {
    return sqlRows<RecentRow>(this.ctx.db, LATEST_BY_OUTCOME_SQL(sourceId, outcomes))
  }

  statusInputs(
    sourceIds: readonly string[],
    from: Date,
    to: Date,
    outcomes: { success: readonly Outcome[]; failure: readonly Outcome[]; recent: number; leading: number },
  ): Promise<StatusInputRow[]> {
    return sqlRows<StatusInputRow>(
      this.ctx.db,
      STATUS_INPUTS_SQL(sourceIds, from.toISOString(), to.toISOString(), outcomes),
    )
  }

  latestProblems(sourceId: string, outcomes: readonly Outcome[], limit: number): Promise<LogRow[]> {
    return sqlRows<LogRow>(this.ctx.db, LATEST_PROBLEMS_SQL(sourceId, outcomes, limit))
  }
}
