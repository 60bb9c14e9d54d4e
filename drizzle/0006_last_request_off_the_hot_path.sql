-- webhook_sources.last_request_at leaves the inbound transaction: bumping a source row cost as much
-- as inserting the lead (about 1 ms here) on every request whose source had not been bumped in 5 s.
-- Each replica now notes the latest request per source in memory and writes them all in one
-- statement every few seconds (src/modules/inbound/last-request.ts); the precision is unchanged.
-- One request: kept with its signature for callers that write a single lead.
CREATE OR REPLACE FUNCTION ingest_lead(
  p_organization_id uuid,
  p_source_id uuid,
  p_new_lead_id uuid,
  p_log_id uuid,
  p_first_name text,
  p_last_name text,
  p_email text,
  p_email_normalized text,
  p_phone_raw text,
  p_phone_e164 text,
  p_status text,
  p_custom_fields jsonb,
  p_attribution jsonb,
  p_received_at timestamptz,
  p_client_ip text,
  p_origin text,
  p_user_agent text,
  p_body_bytes integer,
  p_body text,
  p_body_truncated boolean,
  p_duration_ms real
) RETURNS TABLE (lead_id uuid, outcome text)
LANGUAGE plpgsql AS $$
BEGIN
  RETURN QUERY SELECT i.lead_id, i.outcome FROM ingest_lead_item(
    p_organization_id, p_source_id, p_new_lead_id, p_log_id, p_first_name, p_last_name, p_email,
    p_email_normalized, p_phone_raw, p_phone_e164, p_status, p_custom_fields, p_attribution, p_received_at,
    p_client_ip, p_origin, p_user_agent, p_body_bytes, p_body, p_body_truncated, p_duration_ms
  ) i;
END;
$$;
--> statement-breakpoint

-- A group of requests. Items are processed in (organization, e-mail, phone) order, the same order
-- in every transaction, so concurrent groups take their locks in a consistent order; the rare
-- deadlock that remains (crossing e-mail/phone pairs) is retried item by item by the caller.
CREATE OR REPLACE FUNCTION ingest_leads(p_items jsonb) RETURNS TABLE (idx integer, lead_id uuid, outcome text)
LANGUAGE plpgsql AS $$
DECLARE
  r record;
BEGIN
  FOR r IN
    SELECT * FROM jsonb_to_recordset(p_items) AS x(
      idx integer, organization_id uuid, source_id uuid, new_lead_id uuid, log_id uuid, first_name text,
      last_name text, email text, email_normalized text, phone_raw text, phone_e164 text, status text,
      custom_fields jsonb, attribution jsonb, received_at timestamptz, client_ip text, origin text,
      user_agent text, body_bytes integer, body text, body_truncated boolean, duration_ms real
    )
    ORDER BY x.organization_id, x.email_normalized NULLS LAST, x.phone_e164 NULLS LAST, x.idx
  LOOP
    SELECT i.lead_id, i.outcome INTO lead_id, outcome FROM ingest_lead_item(
      r.organization_id, r.source_id, r.new_lead_id, r.log_id, r.first_name, r.last_name, r.email,
      r.email_normalized, r.phone_raw, r.phone_e164, r.status, r.custom_fields, r.attribution, r.received_at,
      r.client_ip, r.origin, r.user_agent, r.body_bytes, r.body, r.body_truncated, r.duration_ms
    ) i;
    idx := r.idx;
    RETURN NEXT;
  END LOOP;
END;
$$;
--> statement-breakpoint

DROP FUNCTION touch_sources(uuid[], timestamptz);
