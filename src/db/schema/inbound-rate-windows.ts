import { pgTable, timestamp, uuid } from 'drizzle-orm/pg-core'

/**
 * The per-key limit of the inbound route (60 requests a minute per source, spec §8), held by
 * PostgreSQL so it is exact across replicas: the times of the source's counted requests of the
 * last window, at most 60, in ascending order (inbound_rate_take() finds the expired ones by binary
 * search: drizzle/0017). Written by ingest_leads(), log_deliveries() and count_inbound_requests()
 * (drizzle/functions/) under the source's exclusive advisory lock. One small row per source updated
 * in place, so the table keeps room on every page (fillfactor, drizzle/0013) for HOT updates. No
 * foreign key, like the other hot tables (docs/architecture.md): a deleted source's row goes with it
 * (webhook_sources_release_rows).
 */
export const inboundRateWindows = pgTable('inbound_rate_windows', {
  sourceId: uuid('source_id').primaryKey(),
  hits: timestamp('hits', { withTimezone: true, mode: 'date' }).array().notNull(),
})
