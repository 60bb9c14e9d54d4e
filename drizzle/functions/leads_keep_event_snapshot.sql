-- leads_keep_event_snapshot: the BEFORE UPDATE OR DELETE trigger of leads, its one current
-- definition (a repeatable migration).
-- Applied after the versioned migrations whenever this file's checksum changes
-- (src/db/repeatable.ts, docs/architecture.md "SQL functions"): edit it in place, keep every
-- statement re-runnable (CREATE OR REPLACE).
--
-- A `lead.created` event sends the lead as its submission created it. Neither ingest_leads() nor the
-- worker copies the new lead into the event's message (that copy was ~110 bytes of WAL per lead
-- event on the lead path, docs/benchmarks.md): the event has the lead's id as its own (a created
-- lead's id is its submission's log id, which is the event's id), and webhook_message_payload()
-- renders a message whose lead_* columns are empty from the lead row, which is still the snapshot
-- as long as nothing has written it since. This trigger keeps that true: before the first write of
-- any kind to such a lead (an ingest merge, the API's edit or delete, a deleted source releasing it,
-- an organization's deletion), it copies the row as it was into the message: the message the
-- worker's fan-out wrote, or, while the event still waits in the fan-out queue (drizzle/0021), a
-- message it writes itself with the copy (and the source's name now), which the fan-out then takes
-- as it is. Every writer of `leads` goes through it, so none can forget to.
-- A fan-out that writes the same event's message concurrently: whichever inserts second waits for
-- the first to commit, and the trigger's ON CONFLICT then fills the copy into the fan-out's row; a
-- fan-out that read the queue after the trigger's commit finds the message and takes it.
-- The WHEN keeps it off every later write: a lead ingest created has created_at = updated_at until
-- its first merge or edit, and a write that leaves updated_at alone (a source's release) finds the
-- message already filled the next time (the UPDATE below matches only an empty one).
-- History: new on 2026-11-25 (twelfth session) with ingest_leads()'s uncopied lead.created; the
-- queued event's message since drizzle/0021.
CREATE OR REPLACE FUNCTION leads_keep_event_snapshot() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM webhook_fan_out_queue q WHERE q.id = OLD.id) THEN
    INSERT INTO webhook_messages AS m (id, organization_id, event_type, created_at, lead_id, source_id,
      source_name, lead_source_id, lead_first_name, lead_last_name, lead_email, lead_phone_raw,
      lead_phone_e164, lead_status, lead_custom_fields, lead_attribution, lead_created_at,
      lead_updated_at)
    VALUES (OLD.id, OLD.organization_id, 'lead.created', OLD.created_at, OLD.id, OLD.source_id,
      (SELECT s.name FROM webhook_sources s WHERE s.id = OLD.source_id), OLD.source_id,
      OLD.first_name, OLD.last_name, OLD.email, OLD.phone_raw, OLD.phone_e164, OLD.status,
      OLD.custom_fields, OLD.attribution, OLD.created_at, OLD.updated_at)
    ON CONFLICT (id) DO UPDATE SET
      lead_source_id = EXCLUDED.lead_source_id, lead_first_name = EXCLUDED.lead_first_name,
      lead_last_name = EXCLUDED.lead_last_name, lead_email = EXCLUDED.lead_email,
      lead_phone_raw = EXCLUDED.lead_phone_raw, lead_phone_e164 = EXCLUDED.lead_phone_e164,
      lead_status = EXCLUDED.lead_status, lead_custom_fields = EXCLUDED.lead_custom_fields,
      lead_attribution = EXCLUDED.lead_attribution, lead_created_at = EXCLUDED.lead_created_at,
      lead_updated_at = EXCLUDED.lead_updated_at
    WHERE m.lead_id = OLD.id AND m.payload IS NULL AND m.lead_created_at IS NULL;
  ELSE
    UPDATE webhook_messages SET
      lead_source_id = OLD.source_id, lead_first_name = OLD.first_name, lead_last_name = OLD.last_name,
      lead_email = OLD.email, lead_phone_raw = OLD.phone_raw, lead_phone_e164 = OLD.phone_e164,
      lead_status = OLD.status, lead_custom_fields = OLD.custom_fields,
      lead_attribution = OLD.attribution, lead_created_at = OLD.created_at,
      lead_updated_at = OLD.updated_at
    WHERE id = OLD.id AND lead_id = OLD.id AND payload IS NULL AND lead_created_at IS NULL;
  END IF;
  IF TG_OP = 'DELETE' THEN
    RETURN OLD;
  END IF;
  RETURN NEW;
END;
$$;
--> statement-breakpoint
CREATE OR REPLACE TRIGGER leads_keep_event_snapshot BEFORE UPDATE OR DELETE ON leads
  FOR EACH ROW WHEN (OLD.created_at = OLD.updated_at) EXECUTE FUNCTION leads_keep_event_snapshot();
