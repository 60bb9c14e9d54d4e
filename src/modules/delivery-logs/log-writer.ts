import { sql } from 'drizzle-orm'
import type { AppContext } from '../../context'
import { sqlRows } from '../../db/rows'
import { newId } from '../../lib/ids'
import type { Outcome } from './model'

/**
 * A delivery-log entry for an inbound request that stored no lead (the entry of a stored lead is
 * written with it by ingest_leads(), drizzle/functions/ingest_leads.sql).
 */
export interface DeliveryLogEntry {
  sourceId: string
  organizationId: string
  receivedAt: Date
  method: string
  httpStatus: number
  outcome: Exclude<Outcome, 'created' | 'updated'>
  reason: string | null
  clientIp: string
  origin: string | null
  userAgent: string | null
  bodyBytes: number
  body: string | null
  bodyTruncated: boolean
  spamReasons: string[]
  durationMs: number
  /** How many requests the entry stands for (floods of refusals are counted, not written each). */
  repeatCount?: number
}

/**
 * The per-key limit's verdict on a counted request (the inbound route's KeyVerdict, key-limit.ts):
 * whether it was within the limit, what remains, the milliseconds until a slot frees.
 */
export interface WindowVerdict {
  allowed: boolean
  remaining: number
  resetMs: number
}

/** A verdict as the SQL functions return it (inbound_rate_take and its callers). */
export interface WindowVerdictRow {
  allowed: boolean
  remaining: number
  reset_ms: number
}

export function windowVerdict(row: WindowVerdictRow): WindowVerdict {
  return { allowed: row.allowed, remaining: row.remaining, resetMs: row.reset_ms }
}

/** What a delivery-log entry records about the request itself. */
export type RequestFacts = Pick<
  DeliveryLogEntry,
  'receivedAt' | 'clientIp' | 'origin' | 'userAgent' | 'bodyBytes' | 'body' | 'bodyTruncated' | 'durationMs'
>

/**
 * The request's facts as the SQL functions ingest_leads() and log_deliveries() read them
 * (drizzle/functions/ingest_leads.sql, log_deliveries.sql).
 */
export function requestColumns(facts: RequestFacts) {
  return {
    received_at: facts.receivedAt.toISOString(),
    client_ip: facts.clientIp,
    origin: facts.origin,
    user_agent: facts.userAgent,
    body_bytes: facts.bodyBytes,
    body: facts.body,
    body_truncated: facts.bodyTruncated,
    duration_ms: facts.durationMs,
  }
}
export type RequestColumns = ReturnType<typeof requestColumns>

/**
 * Writes delivery-log entries that store no lead: refusals, spam, missing contacts and the counted
 * floods of the rejection aggregator. Several entries go in one statement; log_deliveries()
 * (drizzle/functions/log_deliveries.sql) skips
 * those whose source was deleted meanwhile (it holds each source while writing, so an entry is
 * never left without its source).
 */
export class DeliveryLogWriter {
  constructor(private readonly ctx: AppContext) {}

  /** Entries that count against no key's limit (aggregated 429s, a disabled source's 404s). */
  async write(entries: readonly DeliveryLogEntry[]): Promise<void> {
    if (entries.length === 0) return
    await this.run(entries, false)
  }

  /**
   * The entry of a request that counts against its key's limit (docs/architecture.md "One round
   * trip"): the limit is applied first, in the same statement, and the entry is written only when
   * the request was within it. The verdict, or null when the source was deleted meanwhile (nothing
   * written).
   */
  async writeCounted(entry: DeliveryLogEntry): Promise<WindowVerdict | null> {
    const [row] = await this.run([entry], true)
    return row ? windowVerdict(row) : null
  }

  private run(entries: readonly DeliveryLogEntry[], counted: boolean) {
    const items = entries.map((entry, idx) => ({
      idx,
      counted,
      id: newId(),
      source_id: entry.sourceId,
      organization_id: entry.organizationId,
      method: entry.method,
      http_status: entry.httpStatus,
      outcome: entry.outcome,
      reason: entry.reason,
      spam_reasons: entry.spamReasons,
      repeat_count: entry.repeatCount ?? 1,
      ...requestColumns(entry),
    }))
    // A function call: a `sql` template through sqlRows (docs/architecture.md "Speaking SQL"). Not on
    // the accepted path (refusals, spam, floods counted once a second), so not a prepared statement.
    return sqlRows<WindowVerdictRow & { idx: number }>(
      this.ctx.db,
      sql`select idx, allowed, remaining, reset_ms from log_deliveries(${JSON.stringify(items)}::jsonb)`,
    )
  }
}
