-- Dedup, store and log an accepted lead in ONE statement: one round trip and one transaction per
-- inbound request (DESIGN §7). Concurrency safety comes from transaction-scoped advisory locks on
-- the organization's normalised e-mail and E.164 phone, always taken e-mail first, then phone, so
-- two requests can never wait on each other in a cycle. N identical requests at once therefore give
-- one INSERT and N-1 UPDATEs of the same row.
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
DECLARE
  v_lead_id uuid;
  v_outcome text;
BEGIN
  IF p_email_normalized IS NOT NULL THEN
    PERFORM pg_advisory_xact_lock(hashtextextended('lead:' || p_organization_id::text || ':e:' || p_email_normalized, 0));
  END IF;
  IF p_phone_e164 IS NOT NULL THEN
    PERFORM pg_advisory_xact_lock(hashtextextended('lead:' || p_organization_id::text || ':p:' || p_phone_e164, 0));
  END IF;

  -- Same normalised e-mail first, else the same E.164 phone.
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
    -- Empty fields are filled; status and custom fields come from the new request; the first
    -- attribution a lead got is kept.
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
    p_client_ip, p_origin, p_user_agent, p_body_bytes, p_body, p_body_truncated, '[]'::jsonb, p_duration_ms, 1
  );

  -- last_request_at is kept to within 5 s: writing it on every request would serialise all
  -- requests of a source on its row.
  UPDATE webhook_sources s SET last_request_at = p_received_at
  WHERE s.id = p_source_id AND (s.last_request_at IS NULL OR s.last_request_at < p_received_at - interval '5 seconds');

  lead_id := v_lead_id;
  outcome := v_outcome;
  RETURN NEXT;
END;
$$;
