-- inbound_rate_take() (drizzle/functions) now keeps each key's hits in ascending order and finds the
-- ones that left the window by binary search (width_bucket) and a slice, instead of filtering the
-- whole array on every request (bench/ingest-sql-cpu.ts: ~22 -> ~18 µs of PostgreSQL CPU per lead
-- at groups of 40, docs/benchmarks.md). Arrays written before were in commit order, which two
-- replicas can make slightly out of time order: sorted once here, before the new function is applied.
UPDATE "inbound_rate_windows" SET "hits" = ARRAY(SELECT h FROM unnest("hits") h ORDER BY h)
WHERE cardinality("hits") > 1;
