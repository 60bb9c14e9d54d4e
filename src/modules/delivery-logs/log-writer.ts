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

  async write(entries: readonly DeliveryLogEntry[]): Promise<void> {
    if (entries.length === 0) return
    const items = entries.map((entry) => ({
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
    await sqlRows(this.ctx.db, sql`select log_deliveries(${JSON.stringify(items)}::jsonb) as written`)
  }
}
