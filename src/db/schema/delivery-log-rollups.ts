import { index, integer, pgTable, primaryKey, smallint, text, timestamp, uuid } from 'drizzle-orm/pg-core'
import { webhookSources } from './webhook-sources'

/**
 * Hourly roll-up of `delivery_logs`, so the 24-hour health view reads a few hundred rows instead of
 * every log row. Maintained by a periodic job (src/modules/delivery-logs/rollup.ts), never on the
 * inbound path. `requests` sums `repeat_count`, so an aggregated 429 row counts for every request.
 * `reason` is '' when the log row has none (a primary key column cannot be null).
 */
export const deliveryLogHourly = pgTable(
  'delivery_log_hourly',
  {
    sourceId: uuid('source_id')
      .notNull()
      .references(() => webhookSources.id, { onDelete: 'cascade' }),
    hour: timestamp('hour', { withTimezone: true, mode: 'date' }).notNull(),
    outcome: text('outcome').notNull(),
    httpStatus: smallint('http_status').notNull(),
    reason: text('reason').notNull().default(''),
    requests: integer('requests').notNull(),
  },
  (table) => [
    primaryKey({ columns: [table.sourceId, table.hour, table.outcome, table.httpStatus, table.reason] }),
    // Retention deletes by hour across all sources.
    index('delivery_log_hourly_hour_idx').on(table.hour),
  ],
)

/**
 * Latency histogram per source and hour: `bucket` b counts requests whose duration is in
 * (2^((b-1)/8), 2^(b/8)] ms, so a percentile read from it is at most 9% above the true value.
 */
export const deliveryLogLatencyHourly = pgTable(
  'delivery_log_latency_hourly',
  {
    sourceId: uuid('source_id')
      .notNull()
      .references(() => webhookSources.id, { onDelete: 'cascade' }),
    hour: timestamp('hour', { withTimezone: true, mode: 'date' }).notNull(),
    bucket: smallint('bucket').notNull(),
    requests: integer('requests').notNull(),
  },
  (table) => [
    primaryKey({ columns: [table.sourceId, table.hour, table.bucket] }),
    index('delivery_log_latency_hourly_hour_idx').on(table.hour),
  ],
)

/**
 * Per source: log rows with `received_at` before `rolled_until` are in the roll-up tables; the
 * health view reads rows from there on live from `delivery_logs`.
 */
export const deliveryLogRollupWatermarks = pgTable('delivery_log_rollup_watermarks', {
  sourceId: uuid('source_id')
    .primaryKey()
    .references(() => webhookSources.id, { onDelete: 'cascade' }),
  rolledUntil: timestamp('rolled_until', { withTimezone: true, mode: 'date' }).notNull(),
})
