-- Set-based ingest. ingest_leads(jsonb) looped over its items and ran four or five statements per
-- lead (advisory locks, two planned-per-call lookups, insert or update, delivery log): measured on
-- 2 cores, ~250 µs of PostgreSQL CPU per lead in groups of 8. Now a group costs three statements
-- whatever its size: check + lock every dedup key, then one statement that looks up, inserts,
-- updates and logs the whole group (~130-150 µs per lead on the same machine and load).
--
-- The phone index ends in id, so "the oldest lead with this phone" is the first entry of an index
-- range and no cached plan can prefer walking (organization_id, id) while filtering on the phone.
CREATE INDEX "leads_org_phone_id_idx" ON "leads" USING btree ("organization_id","phone_e164","id") WHERE "leads"."phone_e164" is not null;--> statement-breakpoint
DROP INDEX "leads_org_phone_idx";--> statement-breakpoint

-- custom_fields of several submissions merged in order, like successive `||`.
CREATE AGGREGATE jsonb_merge_agg(jsonb) (SFUNC = jsonb_concat, STYPE = jsonb, INITCOND = '{}');
--> statement-breakpoint

-- Items: [{idx, organization_id, source_id, new_lead_id, log_id, first_name, last_name, email,
-- email_normalized, phone_raw, phone_e164, status, custom_fields, attribution, received_at, client_ip,
-- origin, user_agent, body_bytes, body, body_truncated, duration_ms}]. Returns one row per item.
--
-- Two items of one group must not share a dedup key (organization + e-mail, organization + phone):
-- both would be looked up in the same snapshot and both created. Such a group is refused with
-- SQLSTATE LC409 before anything is written; the caller puts colliding items in different groups
-- (src/modules/inbound/repository.ts), and concurrent groups are serialised by the locks.
-- Items that match one existing lead through different keys are merged into it in idx order,
-- exactly as successive updates would be.
CREATE OR REPLACE FUNCTION ingest_leads(p_items jsonb) RETURNS TABLE (idx integer, lead_id uuid, outcome text)
LANGUAGE plpgsql AS $$
DECLARE
  v_keys bigint;
  v_locked bigint;
BEGIN
  -- Every key of the group, locked in hash order: the same order in every transaction, so groups
  -- wait for each other but never deadlock on these locks.
  WITH keys AS (
    SELECT 'e:' || (e->>'organization_id') || ':' || (e->>'email_normalized') AS key
      FROM jsonb_array_elements(p_items) e WHERE e->>'email_normalized' IS NOT NULL
    UNION ALL
    SELECT 'p:' || (e->>'organization_id') || ':' || (e->>'phone_e164')
      FROM jsonb_array_elements(p_items) e WHERE e->>'phone_e164' IS NOT NULL
  ), distinct_keys AS (
    SELECT DISTINCT hashtextextended('lead:' || key, 0) AS hash FROM keys
  )
  SELECT (SELECT count(DISTINCT key) FROM keys) - (SELECT count(*) FROM keys),
    (SELECT count(pg_advisory_xact_lock(hash)) FROM (SELECT hash FROM distinct_keys ORDER BY hash) ordered)
  INTO v_keys, v_locked;
  IF v_keys <> 0 THEN
    RAISE EXCEPTION 'two items of one group share a dedup key' USING ERRCODE = 'LC409';
  END IF;

  -- A new statement, so a new snapshot: it sees every lead committed by whoever held a lock first.
  RETURN QUERY
  WITH items AS (
    SELECT * FROM jsonb_to_recordset(p_items) AS x(
      idx integer, organization_id uuid, source_id uuid, new_lead_id uuid, log_id uuid, first_name text,
      last_name text, email text, email_normalized text, phone_raw text, phone_e164 text, status text,
      custom_fields jsonb, attribution jsonb, received_at timestamptz, client_ip text, origin text,
      user_agent text, body_bytes integer, body text, body_truncated boolean, duration_ms real)
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
    SELECT m.new_lead_id, m.organization_id, m.source_id, m.first_name, m.last_name, m.email, m.email_normalized,
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
  ),
  logged AS (
    INSERT INTO delivery_logs (id, source_id, organization_id, received_at, method, http_status, outcome, reason,
      lead_id, client_ip, origin, user_agent, body_bytes, body, body_truncated, spam_reasons, duration_ms, repeat_count)
    SELECT m.log_id, m.source_id, m.organization_id, m.received_at, 'POST', 200,
      CASE WHEN m.existing_id IS NULL THEN 'created' ELSE 'updated' END, NULL,
      COALESCE(m.existing_id, m.new_lead_id), m.client_ip, m.origin, m.user_agent, m.body_bytes, m.body,
      m.body_truncated, '[]'::jsonb,
      -- the request's time so far plus this transaction's, up to now
      m.duration_ms + (extract(epoch FROM clock_timestamp() - now()) * 1000)::real, 1
    FROM matched m
  )
  SELECT m.idx, COALESCE(m.existing_id, m.new_lead_id),
    CASE WHEN m.existing_id IS NULL THEN 'created' ELSE 'updated' END
  FROM matched m;
END;
$$;
--> statement-breakpoint

-- The per-item functions are no longer called: a single lead is a group of one.
DROP FUNCTION ingest_lead(
  uuid, uuid, uuid, uuid, text, text, text, text, text, text, text, jsonb, jsonb, timestamptz, text, text,
  text, integer, text, boolean, real
);
--> statement-breakpoint
DROP FUNCTION ingest_lead_item(
  uuid, uuid, uuid, uuid, text, text, text, text, text, text, text, jsonb, jsonb, timestamptz, text, text,
  text, integer, text, boolean, real
);
