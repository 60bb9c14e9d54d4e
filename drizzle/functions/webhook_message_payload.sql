-- webhook_message_payload(webhook_messages): its one current definition (a repeatable migration).
-- Applied after the versioned migrations whenever this file's checksum changes
-- (src/db/repeatable.ts, docs/architecture.md "SQL functions"): edit it in place, keep every
-- statement re-runnable (CREATE OR REPLACE).
--
-- A message's `data`, the payload of the body `{type, timestamp, data}`: the stored `payload`, or
-- for a lead event (drizzle/0018) the lead as its transaction left it, rendered from the message's
-- lead_* columns: the lead as /api/v2/leads shows it, the submission's source (id, and name as it was), and
-- the delivery-log id (the message's own id). The JSON is the one ingest_leads() built and stored
-- before 0018 (the same jsonb_build_object, so the same keys and order). Read by the worker's claim
-- and the messages list.
-- A `lead.created` message whose lead_* columns are empty is rendered from the lead row itself
-- (the row has the message's id), which is its snapshot until something writes it: the trigger
-- leads_keep_event_snapshot copies it into the message before that. One statement reads both, so it
-- sees the lead either unwritten or already copied. A lead gone without the trigger (TRUNCATE) leaves
-- such a message with `lead: null`.
-- History: new with drizzle/0018; the lead row for a created lead since 2026-11-25.
CREATE OR REPLACE FUNCTION webhook_message_payload(m webhook_messages)
  RETURNS jsonb
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
  SELECT COALESCE(m.payload, jsonb_build_object(
    'lead', (
      SELECT jsonb_build_object(
        'lead_id', m.lead_id, 'source_id', l.source_id, 'first_name', l.first_name,
        'last_name', l.last_name, 'email', l.email, 'phone_raw', l.phone_raw,
        'phone_e164', l.phone_e164, 'status', l.status, 'custom_fields', l.custom_fields,
        'attribution', l.attribution,
        'created_at', to_char(l.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
        'updated_at', to_char(l.updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))
      FROM (
        -- the copy: a lead.updated's merge, or a lead.created's lead after the lead was written
        SELECT m.lead_source_id AS source_id, m.lead_first_name AS first_name,
          m.lead_last_name AS last_name, m.lead_email AS email, m.lead_phone_raw AS phone_raw,
          m.lead_phone_e164 AS phone_e164, m.lead_status AS status,
          m.lead_custom_fields AS custom_fields, m.lead_attribution AS attribution,
          m.lead_created_at AS created_at, m.lead_updated_at AS updated_at
        WHERE m.lead_created_at IS NOT NULL
        UNION ALL
        -- a lead.created's lead as nothing has written it since
        SELECT r.source_id, r.first_name, r.last_name, r.email, r.phone_raw, r.phone_e164, r.status,
          r.custom_fields, r.attribution, r.created_at, r.updated_at
        FROM leads r WHERE m.lead_created_at IS NULL AND r.id = m.lead_id
      ) l),
    'source', jsonb_build_object('id', m.source_id, 'name', m.source_name),
    'delivery_log_id', m.id))
$$;
