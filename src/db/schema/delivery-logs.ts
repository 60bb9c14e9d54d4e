import { sql } from 'drizzle-orm'
import {
  boolean,
  check,
  index,
  integer,
  jsonb,
  pgTable,
  real,
  smallint,
  text,
  timestamp,
  uuid,
} from 'drizzle-orm/pg-core'

/**
 * One row per inbound request that names a real source, rejected ones included. A flood of 429s
 * is aggregated: `repeat_count` says how many identical rejections a row stands for.
 */
export const deliveryLogs = pgTable(
  'delivery_logs',
  {
    id: uuid('id').primaryKey(),
    // No foreign keys, for the reason given in leads.ts: the source's delete trigger removes its
    // logs, and log_deliveries()/ingest_leads() never write a log for a source that is gone.
    sourceId: uuid('source_id').notNull(),
    organizationId: uuid('organization_id').notNull(),
    receivedAt: timestamp('received_at', { withTimezone: true, mode: 'date' }).notNull(),
    method: text('method').notNull(),
    httpStatus: smallint('http_status').notNull(),
    // created | updated | spam | error | rejected
    outcome: text('outcome').notNull(),
    reason: text('reason'),
    leadId: uuid('lead_id'),
    clientIp: text('client_ip'),
    origin: text('origin'),
    userAgent: text('user_agent'),
    bodyBytes: integer('body_bytes').notNull().default(0),
    // The request body as text, cut at 8 KB (a cut body is no longer valid JSON).
    body: text('body'),
    bodyTruncated: boolean('body_truncated').notNull().default(false),
    spamReasons: jsonb('spam_reasons').$type<string[]>().notNull().default([]),
    durationMs: real('duration_ms').notNull().default(0),
    repeatCount: integer('repeat_count').notNull().default(1),
  },
  (table) => [
    // The one per-source index: every read of a source's entries is a range of it. A read across
    // outcomes (the newest entries, a time range) is one range per outcome, merged; the outcomes are
    // the closed list below, so that stays at most five ranges however many rows the source has
    // (src/modules/delivery-logs/repository.ts). A second index on (source_id, received_at) served
    // those reads in one range, and cost every lead and logged request one more b-tree entry at a
    // random leaf of the source's range (drizzle/0023, docs/benchmarks.md A45).
    index('delivery_logs_source_outcome_received_idx').on(
      table.sourceId,
      table.outcome,
      table.receivedAt.desc(),
      table.id.desc(),
    ),
    // What makes the merge above complete: an entry of another outcome would be in no range.
    check(
      'delivery_logs_outcome_check',
      sql`${table.outcome} in ('created', 'updated', 'spam', 'error', 'rejected')`,
    ),
    // What lets a status filter read only the outcomes it can have (outcomesWithStatus): 200 is
    // every outcome but `rejected`, any other status is a refusal.
    check(
      'delivery_logs_status_outcome_check',
      sql`(${table.outcome} = 'rejected') = (${table.httpStatus} <> 200)`,
    ),
    // No index on received_at alone: the retention walks (source_id, outcome, received_at) (drizzle/0022).
  ],
)
