-- log_deliveries(jsonb): its one current definition (a repeatable migration).
-- Applied after the versioned migrations whenever this file's checksum changes
-- (src/db/repeatable.ts, docs/architecture.md "SQL functions"): edit it in place, keep every
-- statement re-runnable (CREATE OR REPLACE).
--
-- Delivery-log entries that store no lead (rejections, spam, errors, aggregated 429s), as one
-- statement whatever their number. Items: [{id, source_id, organization_id, received_at, method,
-- http_status, outcome, reason, client_ip, origin, user_agent, body_bytes, body, body_truncated,
-- spam_reasons, duration_ms, repeat_count}]. An entry whose source was deleted meanwhile is
-- skipped (shared advisory lock on the source, as ingest_leads); returns how many were written.
-- History: drizzle/0009.
CREATE OR REPLACE FUNCTION log_deliveries(p_items jsonb) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
  v_written integer;
BEGIN
  PERFORM count(pg_advisory_xact_lock_shared(hash)) FROM (
    SELECT DISTINCT hashtextextended('source:' || (e->>'source_id'), 0) AS hash
    FROM jsonb_array_elements(p_items) e ORDER BY hash
  ) ordered;

  INSERT INTO delivery_logs (id, source_id, organization_id, received_at, method, http_status, outcome, reason,
    client_ip, origin, user_agent, body_bytes, body, body_truncated, spam_reasons, duration_ms, repeat_count)
  SELECT x.id, x.source_id, x.organization_id, x.received_at, x.method, x.http_status, x.outcome, x.reason,
    x.client_ip, x.origin, x.user_agent, x.body_bytes, x.body, x.body_truncated, x.spam_reasons, x.duration_ms,
    x.repeat_count
  FROM jsonb_to_recordset(p_items) AS x(id uuid, source_id uuid, organization_id uuid, received_at timestamptz,
    method text, http_status smallint, outcome text, reason text, client_ip text, origin text, user_agent text,
    body_bytes integer, body text, body_truncated boolean, spam_reasons jsonb, duration_ms real, repeat_count integer)
  WHERE (SELECT true FROM webhook_sources s WHERE s.id = x.source_id);
  GET DIAGNOSTICS v_written = ROW_COUNT;
  RETURN v_written;
END;
$$;
