-- The log retention finds expired entries source by source on (source_id, received_at)
-- (src/modules/delivery-logs/retention.ts); an index on received_at alone served only that hourly
-- job and cost every lead and every logged request one more b-tree entry (~5% of PostgreSQL's CPU
-- per lead at groups of 40: docs/benchmarks.md "Where issue [7] stands").
DROP INDEX "delivery_logs_received_idx";
