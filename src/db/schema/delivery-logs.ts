import {
  boolean,
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
    index('delivery_logs_source_received_idx').on(table.sourceId, table.receivedAt.desc(), table.id.desc()),
    // Latest entries of one outcome (health's last success / last failure / problem deliveries, and the
    // log list filtered by outcome) in a few index probes, however many rows the source has.
    index('delivery_logs_source_outcome_received_idx').on(
      table.sourceId,
      table.outcome,
      table.receivedAt.desc(),
      table.id.desc(),
    ),
    // No index on received_at alone: the retention walks (source_id, received_at) (drizzle/0022).
  ],
)
