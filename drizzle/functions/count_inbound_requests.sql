-- count_inbound_requests(jsonb): its one current definition (a repeatable migration).
-- Applied after the versioned migrations whenever this file's checksum changes
-- (src/db/repeatable.ts, docs/architecture.md "SQL functions"): edit it in place, keep every
-- statement re-runnable (CREATE OR REPLACE).
--
-- The per-key limit for the requests on a webhook URL that write nothing when admitted: a CORS
-- preflight and the informational GET count against the key like a POST (spec §8) but store no
-- lead and no log. Items: [{idx, source_id, received_at}]; the verdicts of inbound_rate_take, under
-- the sources' exclusive advisory locks (in one order, as ingest_leads takes them).
-- History: new with drizzle/0013.
CREATE OR REPLACE FUNCTION count_inbound_requests(p_items jsonb)
  RETURNS TABLE (idx integer, allowed boolean, remaining integer, reset_ms integer)
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM count(pg_advisory_xact_lock(hash)) FROM (
    SELECT DISTINCT hashtextextended('source:' || (e->>'source_id'), 0) AS hash
    FROM jsonb_array_elements(p_items) e ORDER BY hash
  ) ordered;
  RETURN QUERY SELECT * FROM inbound_rate_take(p_items);
END;
$$;
