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
-- and the messages list; a plain SQL expression, so the planner inlines it into both.
-- History: new with drizzle/0018.
CREATE OR REPLACE FUNCTION webhook_message_payload(m webhook_messages)
  RETURNS jsonb
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
  SELECT COALESCE(m.payload, jsonb_build_object(
    'lead', jsonb_build_object(
      'lead_id', m.lead_id, 'source_id', m.lead_source_id, 'first_name', m.lead_first_name,
      'last_name', m.lead_last_name, 'email', m.lead_email, 'phone_raw', m.lead_phone_raw,
      'phone_e164', m.lead_phone_e164, 'status', m.lead_status, 'custom_fields', m.lead_custom_fields,
      'attribution', m.lead_attribution,
      'created_at', to_char(m.lead_created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
      'updated_at', to_char(m.lead_updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')),
    'source', jsonb_build_object('id', m.source_id, 'name', m.source_name),
    'delivery_log_id', m.id))
$$;
