-- Group commit for the inbound path. Requests that reach the store step in the same event-loop
-- turn are written by ONE call of ingest_leads(jsonb): one round trip, one transaction, one commit
-- for all of them; each request is still answered only after its row is committed.
--
-- The per-lead logic moves to ingest_lead_item (dedup, insert or update, delivery log); the
-- source's last_request_at is bumped separately with SKIP LOCKED, so concurrent transactions never
-- wait on (or deadlock over) a source row: whoever holds it is bumping it already.

CREATE OR REPLACE FUNCTION ingest_lead_item(
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
DECLARE
  v_lead_id uuid;
  v_outcome text;
BEGIN
  -- E-mail lock first, then phone: two transactions never wait on each other in a cycle.
  IF p_email_normalized IS NOT NULL THEN
    PERFORM pg_advisory_xact_lock(hashtextextended('lead:' || p_organization_id::text || ':e:' || p_email_normalized, 0));
  END IF;
  IF p_phone_e164 IS NOT NULL THEN
    PERFORM pg_advisory_xact_lock(hashtextextended('lead:' || p_organization_id::text || ':p:' || p_phone_e164, 0));
  END IF;

  IF p_email_normalized IS NOT NULL THEN
    SELECT l.id INTO v_lead_id FROM leads l
    WHERE l.organization_id = p_organization_id AND l.email_normalized = p_email_normalized;
  END IF;
  IF v_lead_id IS NULL AND p_phone_e164 IS NOT NULL THEN
    SELECT l.id INTO v_lead_id FROM leads l
    WHERE l.organization_id = p_organization_id AND l.phone_e164 = p_phone_e164
    ORDER BY l.id LIMIT 1;
  END IF;

  IF v_lead_id IS NULL THEN
    INSERT INTO leads (
      id, organization_id, source_id, first_name, last_name, email, email_normalized, phone_raw,
      phone_e164, status, custom_fields, attribution, created_at, updated_at
    ) VALUES (
      p_new_lead_id, p_organization_id, p_source_id, p_first_name, p_last_name, p_email,
      p_email_normalized, p_phone_raw, p_phone_e164, p_status, p_custom_fields, p_attribution,
      p_received_at, p_received_at
    );
    v_lead_id := p_new_lead_id;
    v_outcome := 'created';
  ELSE
    UPDATE leads l SET
      first_name = COALESCE(l.first_name, p_first_name),
      last_name = COALESCE(l.last_name, p_last_name),
      email = COALESCE(l.email, p_email),
      email_normalized = COALESCE(l.email_normalized, p_email_normalized),
      phone_raw = COALESCE(l.phone_raw, p_phone_raw),
      phone_e164 = COALESCE(l.phone_e164, p_phone_e164),
      status = COALESCE(p_status, l.status),
      custom_fields = l.custom_fields || p_custom_fields,
      attribution = CASE WHEN l.attribution = '{}'::jsonb THEN p_attribution ELSE l.attribution END,
      updated_at = p_received_at
    WHERE l.id = v_lead_id;
    v_outcome := 'updated';
  END IF;

  INSERT INTO delivery_logs (
    id, source_id, organization_id, received_at, method, http_status, outcome, reason, lead_id,
    client_ip, origin, user_agent, body_bytes, body, body_truncated, spam_reasons, duration_ms, repeat_count
  ) VALUES (
    p_log_id, p_source_id, p_organization_id, p_received_at, 'POST', 200, v_outcome, NULL, v_lead_id,
    p_client_ip, p_origin, p_user_agent, p_body_bytes, p_body, p_body_truncated, '[]'::jsonb,
    p_duration_ms + (extract(epoch FROM clock_timestamp() - now()) * 1000)::real, 1
  );

  lead_id := v_lead_id;
  outcome := v_outcome;
  RETURN NEXT;
END;
$$;
--> statement-breakpoint

-- last_request_at is kept to within 5 s; a row somebody else has locked is skipped, not waited for.
CREATE OR REPLACE FUNCTION touch_sources(p_source_ids uuid[], p_at timestamptz) RETURNS void
LANGUAGE sql AS $$
  UPDATE webhook_sources s SET last_request_at = p_at
  WHERE s.id IN (
    SELECT w.id FROM webhook_sources w
    WHERE w.id = ANY (p_source_ids) AND (w.last_request_at IS NULL OR w.last_request_at < p_at - interval '5 seconds')
    ORDER BY w.id
    FOR UPDATE SKIP LOCKED
  );
$$;
--> statement-breakpoint

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
  PERFORM touch_sources(ARRAY[p_source_id], p_received_at);
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
  v_sources uuid[] := '{}';
  v_latest timestamptz;
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
    IF NOT r.source_id = ANY (v_sources) THEN v_sources := v_sources || r.source_id; END IF;
    v_latest := GREATEST(v_latest, r.received_at);
    RETURN NEXT;
  END LOOP;
  PERFORM touch_sources(v_sources, v_latest);
END;
$$;
