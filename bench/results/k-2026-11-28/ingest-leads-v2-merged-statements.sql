CREATE OR REPLACE FUNCTION ingest_leads_v2(p_items jsonb)
  RETURNS TABLE (idx integer, lead_id uuid, outcome text, webhook_events boolean, remaining integer,
    reset_ms integer)
LANGUAGE plpgsql
-- Generic plans for its statements (and inbound_rate_take's, called from it), made once per
-- connection: with the default `auto` a one-lead call cost ~880 µs of PostgreSQL CPU against ~480
-- with generic plans (the plan cache planned the statements again on every call it judged a custom
-- plan cheaper), and at 1,000 leads/s nearly every group is one lead; at groups of 40 the cost was
-- the same (docs/benchmarks.md "PostgreSQL per lead"). An ANALYZE still invalidates the plans.
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
  v_duplicates bigint;
  v_locked bigint;
  v_webhook_events boolean;
  v_rate_idx integer[];
  v_rate_allowed boolean[];
  v_rate_remaining integer[];
  v_rate_reset integer[];
  -- the one item of a one-item group, and inbound_rate_take's limit and window for it
  c_limit CONSTANT integer := 60;
  c_window CONSTANT interval := interval '60 seconds';
  v_item jsonb;
  v_source uuid;
  v_organization uuid;
  v_log uuid;
  v_email text;
  v_phone text;
  v_received timestamptz;
  v_hits timestamptz[];
  v_oldest timestamptz;
  v_matched boolean;
  v_source_exists boolean;
  h1 bigint;
  h2 bigint;
  h3 bigint;
  h_t bigint;
  v_void text;
BEGIN
  -- A group of one item: the same rules one scalar statement at a time. At 1,000 leads/s nearly
  -- every group is one lead, and the set-based statements below cost such a call ~410 µs of
  -- PostgreSQL CPU, much of it setting up their plans' many nodes (the executor's start-up, the
  -- webhook and merge branches a new lead never runs); this path costs ~285 (docs/benchmarks.md
  -- A50). It writes a new lead whose organization has no enabled endpoint itself; a lead that
  -- matches an existing one, or one that an endpoint may take, goes on to the set-based statement
  -- with its verdict (one source of truth for the merge and the events). The tests hold the two
  -- paths to the same rows (test/integration/ingest-one-item.test.ts).
  IF jsonb_array_length(p_items) = 1 THEN
    v_item := p_items->0;
    v_source := (v_item->>'source_id')::uuid;
    v_organization := (v_item->>'organization_id')::uuid;
    v_log := (v_item->>'log_id')::uuid;
    v_email := v_item->>'email_normalized';
    v_phone := v_item->>'phone_e164';
    v_received := (v_item->>'received_at')::timestamptz;
    -- the lock keys exactly as the group's statement below spells them (the same text, the same
    -- hashes), in the same global order
    h1 := hashtextextended('lead:e:' || (v_item->>'organization_id') || ':' || v_email, 0);
    h2 := hashtextextended('lead:p:' || (v_item->>'organization_id') || ':' || v_phone, 0);
    h3 := hashtextextended('source:' || (v_item->>'source_id'), 0);
    -- ascending, a null (no key) last
    IF h2 IS NOT NULL AND (h1 IS NULL OR h2 < h1) THEN h_t := h1; h1 := h2; h2 := h_t; END IF;
    IF h3 IS NOT NULL AND (h2 IS NULL OR h3 < h2) THEN h_t := h2; h2 := h3; h3 := h_t; END IF;
    IF h2 IS NOT NULL AND (h1 IS NULL OR h2 < h1) THEN h_t := h1; h1 := h2; h2 := h_t; END IF;
    v_void := pg_advisory_xact_lock(h1);
    IF h2 IS NOT NULL THEN v_void := pg_advisory_xact_lock(h2); END IF;
    IF h3 IS NOT NULL THEN v_void := pg_advisory_xact_lock(h3); END IF;
    SELECT EXISTS (SELECT 1 FROM webhook_sources s WHERE s.id = v_source),
      EXISTS (SELECT 1 FROM webhook_endpoints e WHERE e.enabled AND e.organization_id = v_organization),
      COALESCE((SELECT w.hits FROM inbound_rate_windows w WHERE w.source_id = v_source), '{}'),
      EXISTS (SELECT 1 FROM leads l WHERE l.organization_id = v_organization AND l.email_normalized = v_email)
        OR EXISTS (SELECT 1 FROM leads l WHERE l.organization_id = v_organization AND l.phone_e164 = v_phone)
      INTO v_source_exists, v_webhook_events, v_hits, v_matched;
    IF NOT v_source_exists THEN
      RETURN;
    END IF;
    v_hits := v_hits[width_bucket(v_received - c_window, v_hits) + 1:];
    IF cardinality(v_hits) >= c_limit THEN
      RETURN QUERY SELECT (v_item->>'idx')::integer, NULL::uuid, 'rate_limited'::text, v_webhook_events, 0,
        (extract(epoch FROM v_hits[1] + c_window - v_received) * 1000)::integer;
      RETURN;
    END IF;
    v_oldest := least(v_hits[1], v_received);
    IF cardinality(v_hits) = 0 OR v_hits[cardinality(v_hits)] <= v_received THEN
      v_hits := v_hits || v_received;
    ELSE
      v_hits := ARRAY(SELECT h FROM unnest(v_hits || v_received) h ORDER BY h);
    END IF;
    v_rate_idx := ARRAY[(v_item->>'idx')::integer];
    v_rate_allowed := ARRAY[true];
    v_rate_remaining := ARRAY[c_limit - cardinality(v_hits)];
    v_rate_reset := ARRAY[(extract(epoch FROM v_oldest + c_window - v_received) * 1000)::integer];
    IF NOT v_matched AND NOT v_webhook_events THEN
      WITH w AS (
        INSERT INTO inbound_rate_windows AS w (source_id, hits) VALUES (v_source, v_hits)
          ON CONFLICT (source_id) DO UPDATE SET hits = excluded.hits),
      l AS (
        INSERT INTO leads (id, organization_id, source_id, first_name, last_name, email, email_normalized,
          phone_raw, phone_e164, status, custom_fields, attribution, created_at, updated_at)
        VALUES (v_log, v_organization, v_source, v_item->>'first_name', v_item->>'last_name', v_item->>'email',
          v_email, v_item->>'phone_raw', v_phone, v_item->>'status', v_item->'custom_fields',
          v_item->'attribution', v_received, v_received))
      INSERT INTO delivery_logs (id, source_id, organization_id, received_at, method, http_status, outcome,
        lead_id, client_ip, origin, user_agent, body_bytes, body, body_truncated, spam_reasons, duration_ms,
        repeat_count)
      VALUES (v_log, v_source, v_organization, v_received, 'POST', 200, 'created', v_log,
        v_item->>'client_ip', v_item->>'origin', v_item->>'user_agent', (v_item->>'body_bytes')::integer,
        v_item->>'body', (v_item->>'body_truncated')::boolean, '[]'::jsonb,
        (v_item->>'duration_ms')::real + (extract(epoch FROM clock_timestamp() - now()) * 1000)::real, 1);
      RETURN QUERY SELECT v_rate_idx[1], v_log, 'created'::text, false, v_rate_remaining[1], v_rate_reset[1];
      RETURN;
    END IF;
    INSERT INTO inbound_rate_windows AS w (source_id, hits) VALUES (v_source, v_hits)
      ON CONFLICT (source_id) DO UPDATE SET hits = excluded.hits;
  ELSE
    WITH keys AS (
      SELECT 'e:' || (e->>'organization_id') || ':' || (e->>'email_normalized') AS key
        FROM jsonb_array_elements(p_items) e WHERE e->>'email_normalized' IS NOT NULL
      UNION ALL
      SELECT 'p:' || (e->>'organization_id') || ':' || (e->>'phone_e164')
        FROM jsonb_array_elements(p_items) e WHERE e->>'phone_e164' IS NOT NULL
    ), locks AS (
      SELECT DISTINCT hashtextextended('lead:' || key, 0) AS hash, false AS shared FROM keys
      UNION
      SELECT hashtextextended('source:' || (e->>'source_id'), 0), false FROM jsonb_array_elements(p_items) e
    )
    SELECT (SELECT count(*) FROM keys) - (SELECT count(DISTINCT key) FROM keys),
      (SELECT count(CASE WHEN shared THEN pg_advisory_xact_lock_shared(hash) ELSE pg_advisory_xact_lock(hash) END)
         FROM (SELECT hash, shared FROM locks ORDER BY hash) ordered)
    INTO v_duplicates, v_locked;
    IF v_duplicates <> 0 THEN
      RAISE EXCEPTION 'two items of one group share a dedup key' USING ERRCODE = 'LC409';
    END IF;

    -- The per-key limit, after the locks (a new statement, so a new snapshot: no source deleted
    -- before the locks were granted is counted, and items whose source is gone get no verdict).
    SELECT array_agg(r.idx), array_agg(r.allowed), array_agg(r.remaining), array_agg(r.reset_ms)
    INTO v_rate_idx, v_rate_allowed, v_rate_remaining, v_rate_reset
    FROM inbound_rate_take(p_items) r;

    -- Outbound webhooks (drizzle/0010): only a group whose organization has an enabled endpoint writes
    -- events. Without endpoints this probe of a partial index is all the outbox costs a group: the
    -- statement below writes the events in CTEs gated by its result (drizzle/0015). A first version
    -- of drizzle/0010 wrote them there ungated (RETURNING every inserted lead, the endpoints joined
    -- for every group) and made every group ~25% slower even when it wrote none (bench/outbox-ingest.ts).
    SELECT EXISTS (
      SELECT 1 FROM webhook_endpoints e
      WHERE e.enabled AND e.organization_id IN (
        SELECT DISTINCT (x->>'organization_id')::uuid FROM jsonb_array_elements(p_items) x)
    ) INTO v_webhook_events;

  END IF;

  -- A new statement, so a new snapshot: it sees every lead committed by whoever held a lock first,
  -- and no source deleted before this group's locks were granted.
  RETURN QUERY
  WITH rates AS (
    SELECT * FROM unnest(v_rate_idx, v_rate_allowed, v_rate_remaining, v_rate_reset)
      AS r(idx, allowed, remaining, reset_ms)
  ),
  -- Only the items the limit admitted; inbound_rate_take gave no verdict to an item whose source
  -- is gone, so the join also leaves those out.
  items AS (
    SELECT x.*, r.remaining, r.reset_ms FROM jsonb_to_recordset(p_items) AS x(
      idx integer, organization_id uuid, source_id uuid, log_id uuid, first_name text,
      last_name text, email text, email_normalized text, phone_raw text, phone_e164 text, status text,
      custom_fields jsonb, attribution jsonb, received_at timestamptz, client_ip text, origin text,
      user_agent text, body_bytes integer, body text, body_truncated boolean, duration_ms real)
    JOIN rates r ON r.idx = x.idx AND r.allowed
  ),
  -- DESIGN §7: the lead with the same normalised e-mail, else the oldest with the same E.164 phone.
  matched AS MATERIALIZED (
    SELECT i.*, COALESCE(
      (SELECT l.id FROM leads l WHERE l.organization_id = i.organization_id
         AND l.email_normalized = i.email_normalized AND l.email_normalized IS NOT NULL),
      (SELECT l.id FROM leads l WHERE l.organization_id = i.organization_id
         AND l.phone_e164 = i.phone_e164 AND l.phone_e164 IS NOT NULL ORDER BY l.id LIMIT 1)
    ) AS existing_id
    FROM items i
  ),
  inserted AS (
    INSERT INTO leads (id, organization_id, source_id, first_name, last_name, email, email_normalized, phone_raw,
      phone_e164, status, custom_fields, attribution, created_at, updated_at)
    SELECT m.log_id, m.organization_id, m.source_id, m.first_name, m.last_name, m.email, m.email_normalized,
      m.phone_raw, m.phone_e164, m.status, m.custom_fields, m.attribution, m.received_at, m.received_at
    FROM matched m WHERE m.existing_id IS NULL
  ),
  -- Fields a lead lacks are filled (first value wins), status and custom fields take the latest,
  -- attribution stays the first non-empty one.
  changes AS (
    SELECT m.existing_id,
      (array_agg(m.first_name ORDER BY m.idx) FILTER (WHERE m.first_name IS NOT NULL))[1] AS first_name,
      (array_agg(m.last_name ORDER BY m.idx) FILTER (WHERE m.last_name IS NOT NULL))[1] AS last_name,
      (array_agg(m.email ORDER BY m.idx) FILTER (WHERE m.email IS NOT NULL))[1] AS email,
      (array_agg(m.email_normalized ORDER BY m.idx) FILTER (WHERE m.email_normalized IS NOT NULL))[1] AS email_normalized,
      (array_agg(m.phone_raw ORDER BY m.idx) FILTER (WHERE m.phone_raw IS NOT NULL))[1] AS phone_raw,
      (array_agg(m.phone_e164 ORDER BY m.idx) FILTER (WHERE m.phone_e164 IS NOT NULL))[1] AS phone_e164,
      (array_agg(m.status ORDER BY m.idx DESC) FILTER (WHERE m.status IS NOT NULL))[1] AS status,
      jsonb_merge_agg(m.custom_fields ORDER BY m.idx) AS custom_fields,
      (array_agg(m.attribution ORDER BY m.idx) FILTER (WHERE m.attribution <> '{}'::jsonb))[1] AS attribution,
      (array_agg(m.received_at ORDER BY m.idx DESC))[1] AS received_at
    FROM matched m WHERE m.existing_id IS NOT NULL
    GROUP BY m.existing_id
  ),
  updated AS (
    UPDATE leads l SET
      first_name = COALESCE(l.first_name, c.first_name),
      last_name = COALESCE(l.last_name, c.last_name),
      email = COALESCE(l.email, c.email),
      email_normalized = COALESCE(l.email_normalized, c.email_normalized),
      phone_raw = COALESCE(l.phone_raw, c.phone_raw),
      phone_e164 = COALESCE(l.phone_e164, c.phone_e164),
      status = COALESCE(c.status, l.status),
      custom_fields = l.custom_fields || c.custom_fields,
      attribution = CASE WHEN l.attribution = '{}'::jsonb THEN COALESCE(c.attribution, l.attribution) ELSE l.attribution END,
      updated_at = c.received_at
    FROM changes c WHERE l.id = c.existing_id
    -- the merged lead, for its lead.updated payload (a later CTE would see the lead before this
    -- update: every part of one statement reads the same snapshot)
    RETURNING l.id, l.source_id, l.first_name, l.last_name, l.email, l.phone_raw, l.phone_e164, l.status,
      l.custom_fields, l.attribution, l.created_at, l.updated_at
  ),
  logged AS (
    INSERT INTO delivery_logs (id, source_id, organization_id, received_at, method, http_status, outcome, reason,
      lead_id, client_ip, origin, user_agent, body_bytes, body, body_truncated, spam_reasons, duration_ms, repeat_count)
    SELECT m.log_id, m.source_id, m.organization_id, m.received_at, 'POST', 200,
      CASE WHEN m.existing_id IS NULL THEN 'created' ELSE 'updated' END, NULL,
      COALESCE(m.existing_id, m.log_id), m.client_ip, m.origin, m.user_agent, m.body_bytes, m.body,
      m.body_truncated, '[]'::jsonb,
      -- the request's time so far plus this transaction's, up to now
      m.duration_ms + (extract(epoch FROM clock_timestamp() - now()) * 1000)::real, 1
    FROM matched m
  ),
  -- Outbound webhooks: a `lead.created` / `lead.updated` event for every stored submission that an
  -- enabled endpoint of the organization takes (type and source). Gated by v_webhook_events, a
  -- parameter of the plan: a group whose organization has no enabled endpoint runs none of it (a
  -- one-time filter), so it costs such a group nothing beyond the probe above. The event's id is the
  -- delivery-log id, a UUIDv7, so messages list in creation order.
  events AS (
    SELECT ev.* FROM (
      SELECT mm.*, CASE WHEN mm.existing_id IS NULL THEN 'lead.created' ELSE 'lead.updated' END AS event_type
      FROM matched mm WHERE v_webhook_events) ev
    WHERE EXISTS (
      SELECT 1 FROM webhook_endpoints e
      WHERE e.organization_id = ev.organization_id AND e.enabled
        AND (e.event_types = '[]'::jsonb OR e.event_types ? ev.event_type)
        AND (e.source_ids = '[]'::jsonb OR e.source_ids ? ev.source_id::text))
  ),
  -- Every event is queued by its id alone (drizzle/0021): the worker's fan-out writes its message
  -- and one delivery per endpoint when it takes it, off the lead's wait. A created lead's event is
  -- nothing more here: the lead row is its snapshot (it has the event's id: a created lead's id is
  -- its submission's log id), and the trigger leads_keep_event_snapshot writes the message with the
  -- row as it was before anything first changes or deletes it; the source's name is read when the
  -- message is written, and a source renamed or deleted first writes its queued events' messages
  -- with the name they had (webhook_sources_keep_event_names, webhook_sources_release_rows). A key
  -- and its b-tree entry: ~130 bytes of WAL less per lead event than the message row with the
  -- fan-out index (docs/benchmarks.md).
  queued AS (
    INSERT INTO webhook_fan_out_queue (id) SELECT ev.log_id FROM events ev
  ),
  -- An updated lead's message is written with it: its lead is the merge, from RETURNING, in the
  -- message's lead_* columns (drizzle/0018: its `data` is rendered when read,
  -- webhook_message_payload()), and the source's name as this transaction reads it.
  messages AS (
    INSERT INTO webhook_messages (id, organization_id, event_type, created_at, lead_id, lead_source_id,
      lead_first_name, lead_last_name, lead_email, lead_phone_raw, lead_phone_e164, lead_status,
      lead_custom_fields, lead_attribution, lead_created_at, lead_updated_at, source_id, source_name)
    SELECT m.log_id, m.organization_id, m.event_type, m.received_at, u.id, u.source_id,
      u.first_name, u.last_name, u.email, u.phone_raw, u.phone_e164, u.status, u.custom_fields, u.attribution,
      u.created_at, u.updated_at, m.source_id, src.name
    FROM events m
    JOIN updated u ON u.id = m.existing_id
    LEFT JOIN webhook_sources src ON src.id = m.source_id
  )
  SELECT m.idx, COALESCE(m.existing_id, m.log_id),
    CASE WHEN m.existing_id IS NULL THEN 'created' ELSE 'updated' END, v_webhook_events, m.remaining, m.reset_ms
  FROM matched m
  UNION ALL
  SELECT r.idx, NULL::uuid, 'rate_limited', v_webhook_events, r.remaining, r.reset_ms
  FROM rates r WHERE NOT r.allowed;
END;
$$;
