-- leads_keep_event_snapshot: the BEFORE UPDATE OR DELETE trigger of leads, its one current
-- definition (a repeatable migration).
-- Applied after the versioned migrations whenever this file's checksum changes
-- (src/db/repeatable.ts, docs/architecture.md "SQL functions"): edit it in place, keep every
-- statement re-runnable (CREATE OR REPLACE).
--
-- A `lead.created` event sends the lead as its submission created it. ingest_leads() does not copy
-- the new lead into the event's message (that copy was ~110 bytes of WAL per lead event on the lead
-- path, docs/benchmarks.md): the message has the lead's id as its own (a created lead's id is its
-- submission's log id, which is the message's id) and its lead_* columns empty, and
-- webhook_message_payload() renders it from the lead row, which is still the snapshot as long as
-- nothing has written it since. This trigger keeps that true: before the first write of any kind to
-- such a lead (an ingest merge, the API's edit or delete, a deleted source releasing it, an
-- organization's deletion), it copies the row as it was into the message. Every writer of `leads`
-- goes through it, so none can forget to.
-- The WHEN keeps it off every later write: a lead ingest created has created_at = updated_at until
-- its first merge or edit, and a write that leaves updated_at alone (a source's release) finds the
-- message already filled the next time (the UPDATE below matches only an empty one).
-- History: new on 2026-11-25 (twelfth session) with ingest_leads()'s uncopied lead.created.
CREATE OR REPLACE FUNCTION leads_keep_event_snapshot() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE webhook_messages SET
    lead_source_id = OLD.source_id, lead_first_name = OLD.first_name, lead_last_name = OLD.last_name,
    lead_email = OLD.email, lead_phone_raw = OLD.phone_raw, lead_phone_e164 = OLD.phone_e164,
    lead_status = OLD.status, lead_custom_fields = OLD.custom_fields,
    lead_attribution = OLD.attribution, lead_created_at = OLD.created_at,
    lead_updated_at = OLD.updated_at
  WHERE id = OLD.id AND lead_id = OLD.id AND payload IS NULL AND lead_created_at IS NULL;
  IF TG_OP = 'DELETE' THEN
    RETURN OLD;
  END IF;
  RETURN NEW;
END;
$$;
--> statement-breakpoint
CREATE OR REPLACE TRIGGER leads_keep_event_snapshot BEFORE UPDATE OR DELETE ON leads
  FOR EACH ROW WHEN (OLD.created_at = OLD.updated_at) EXECUTE FUNCTION leads_keep_event_snapshot();
