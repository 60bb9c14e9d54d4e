-- webhook_sources_keep_event_names: the AFTER UPDATE OF name trigger of webhook_sources, and
-- webhook_sources_write_queued_events(), which it and webhook_sources_release_rows call; their one
-- current definition (a repeatable migration).
-- Applied after the versioned migrations whenever this file's checksum changes
-- (src/db/repeatable.ts, docs/architecture.md "SQL functions"): edit it in place, keep every
-- statement re-runnable (CREATE OR REPLACE).
--
-- A lead event names its submission's source as it was when the lead was stored. Since drizzle/0021
-- a `lead.created` event waits in the fan-out queue as its id alone, and the worker's fan-out reads
-- the source's name when it writes the message: milliseconds later, or minutes after a saturated
-- spell. A rename (or a delete, webhook_sources_release_rows) in between first writes those queued
-- events' messages with the name they had; the fan-out then takes them as they are.
-- The rename waits for the source's ingest groups in flight (they hold its advisory lock, see
-- webhook_sources_wait_for_writers), so the events they queue are written with the old name too:
-- every lead stored before the rename commits is named as before it.
-- History: new with drizzle/0021.
CREATE OR REPLACE FUNCTION webhook_sources_write_queued_events(p_source_id uuid, p_name text)
  RETURNS void LANGUAGE sql AS $$
  INSERT INTO webhook_messages (id, organization_id, event_type, created_at, lead_id, source_id, source_name)
  SELECT l.id, l.organization_id, 'lead.created', l.created_at, l.id, p_source_id, p_name
  FROM webhook_fan_out_queue q JOIN leads l ON l.id = q.id
  WHERE l.source_id = p_source_id
  ON CONFLICT (id) DO NOTHING
$$;
--> statement-breakpoint
CREATE OR REPLACE FUNCTION webhook_sources_keep_event_names() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_advisory_xact_lock(hashtextextended('source:' || OLD.id::text, 0));
  PERFORM webhook_sources_write_queued_events(OLD.id, OLD.name);
  RETURN NULL;
END;
$$;
--> statement-breakpoint
CREATE OR REPLACE TRIGGER webhook_sources_keep_event_names AFTER UPDATE OF name ON webhook_sources
  FOR EACH ROW WHEN (OLD.name IS DISTINCT FROM NEW.name) EXECUTE FUNCTION webhook_sources_keep_event_names();
