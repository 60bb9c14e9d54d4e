-- One per-source index on delivery_logs instead of two. Every read of a source's entries is now a
-- range of (source_id, outcome, received_at, id): one range for one outcome, or one per outcome,
-- merged, for the newest entries and time ranges across outcomes (src/modules/delivery-logs/).
-- (source_id, received_at, id) cost every lead and logged request one more b-tree entry at a
-- random leaf of its source's range (docs/benchmarks.md A45).
DROP INDEX "delivery_logs_source_received_idx";--> statement-breakpoint
-- The merge is complete only if no entry has another outcome. NOT VALID: new and updated rows are
-- checked, existing ones (all written with these outcomes) are not scanned, so the migration holds
-- its lock for no longer than on an empty table.
ALTER TABLE "delivery_logs" ADD CONSTRAINT "delivery_logs_outcome_check" CHECK ("delivery_logs"."outcome" in ('created', 'updated', 'spam', 'error', 'rejected')) NOT VALID;
