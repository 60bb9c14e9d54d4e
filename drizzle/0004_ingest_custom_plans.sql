-- The dedup lookups inside ingest_lead_item are planned per call with the real values. A plan
-- cached by a connection while `leads` was small and had no statistics can scan every lead of the
-- organization through (organization_id, id) instead of the unique (organization_id, email) index,
-- and keeps doing so for the connection's life: ingest then slows down as leads accumulate (seen on
-- a fresh database under load). Re-planning these short statements costs less than one such scan.
ALTER FUNCTION ingest_lead_item(
  uuid, uuid, uuid, uuid, text, text, text, text, text, text, text, jsonb, jsonb, timestamptz, text, text,
  text, integer, text, boolean, real
) SET plan_cache_mode = force_custom_plan;
