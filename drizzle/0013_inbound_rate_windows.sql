-- The per-key limit of the inbound route moves from Redis into the group commit (issue [7] option A,
-- docs/architecture.md "One round trip"): each source's counted requests of the last minute, one
-- small row per source rewritten on every counted request. Pages keep room for the new row version
-- (fillfactor, as webhook_sources in 0008), so the updates stay HOT: on their page, no index touched.
CREATE TABLE "inbound_rate_windows" (
	"source_id" uuid PRIMARY KEY NOT NULL,
	"hits" timestamp with time zone[] NOT NULL
) WITH (fillfactor = 50);
