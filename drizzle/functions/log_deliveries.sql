-- log_deliveries(jsonb): its one current definition (a repeatable migration).
-- Applied after the versioned migrations whenever this file's checksum changes
-- (src/db/repeatable.ts, docs/architecture.md "SQL functions"): edit it in place, keep every
-- statement re-runnable (CREATE OR REPLACE).
--
-- Delivery-log entries that store no lead (rejections, spam, errors, aggregated 429s), as one
-- statement whatever their number. Items: [{idx, counted, id, source_id, organization_id,
-- received_at, method, http_status, outcome, reason, client_ip, origin, user_agent, body_bytes,
-- body, body_truncated, spam_reasons, duration_ms, repeat_count}]. An entry whose source was deleted
-- meanwhile is skipped (advisory lock on the source, as ingest_leads).
-- A `counted` entry is a request that counts against its key's limit (a POST refused after the
-- key, spam, a missing contact, a refused preflight: docs/architecture.md "One round trip"): it
-- goes through inbound_rate_take first, and one over the limit is not written (its caller answers
-- 429 and counts it with the other 429s). Returns the verdict of each counted entry; its source
-- is locked exclusively for that (shared otherwise, which is all a source's delete needs).
-- History: drizzle/0009, 0013.
-- The return type changed with 0013 (a verdict per counted entry instead of a count).
DROP FUNCTION IF EXISTS log_deliveries(jsonb);
--> statement-breakpoint
CREATE FUNCTION log_deliveries(p_items jsonb)
  RETURNS TABLE (idx integer, allowed boolean, remaining integer, reset_ms integer)
LANGUAGE plpgsql AS $$
DECLARE
  v_rate_idx integer[];
  v_rate_allowed boolean[];
  v_rate_remaining integer[];
  v_rate_reset integer[];
BEGIN
  PERFORM count(CASE WHEN counted THEN pg_advisory_xact_lock(hash) ELSE pg_advisory_xact_lock_shared(hash) END)
  FROM (
    SELECT hashtextextended('source:' || (e->>'source_id'), 0) AS hash,
      bool_or(COALESCE((e->>'counted')::boolean, false)) AS counted
    FROM jsonb_array_elements(p_items) e GROUP BY 1 ORDER BY 1
  ) ordered;

  IF jsonb_path_exists(p_items, '$[*] ? (@.counted == true)') THEN
    SELECT array_agg(r.idx), array_agg(r.allowed), array_agg(r.remaining), array_agg(r.reset_ms)
    INTO v_rate_idx, v_rate_allowed, v_rate_remaining, v_rate_reset
    FROM inbound_rate_take(jsonb_path_query_array(p_items, '$[*] ? (@.counted == true)')) r;
  END IF;

  INSERT INTO delivery_logs (id, source_id, organization_id, received_at, method, http_status, outcome, reason,
    client_ip, origin, user_agent, body_bytes, body, body_truncated, spam_reasons, duration_ms, repeat_count)
  SELECT x.id, x.source_id, x.organization_id, x.received_at, x.method, x.http_status, x.outcome, x.reason,
    x.client_ip, x.origin, x.user_agent, x.body_bytes, x.body, x.body_truncated, x.spam_reasons, x.duration_ms,
    x.repeat_count
  FROM jsonb_to_recordset(p_items) AS x(idx integer, counted boolean, id uuid, source_id uuid, organization_id uuid,
    received_at timestamptz, method text, http_status smallint, outcome text, reason text, client_ip text,
    origin text, user_agent text, body_bytes integer, body text, body_truncated boolean, spam_reasons jsonb,
    duration_ms real, repeat_count integer)
  WHERE (SELECT true FROM webhook_sources s WHERE s.id = x.source_id)
    -- a counted entry is written when the limit admitted it (no verdict: its source is gone)
    AND (x.counted IS NOT TRUE OR x.idx = ANY (
      SELECT r.idx FROM unnest(v_rate_idx, v_rate_allowed) AS r(idx, allowed) WHERE r.allowed));

  RETURN QUERY
  SELECT r.idx, r.allowed, r.remaining, r.reset_ms
  FROM unnest(v_rate_idx, v_rate_allowed, v_rate_remaining, v_rate_reset) AS r(idx, allowed, remaining, reset_ms);
END;
$$;
