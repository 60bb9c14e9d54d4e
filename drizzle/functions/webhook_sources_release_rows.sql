-- webhook_sources_release_rows: the AFTER DELETE trigger of webhook_sources, its one current
-- definition (a repeatable migration).
-- Applied after the versioned migrations whenever this file's checksum changes
-- (src/db/repeatable.ts, docs/architecture.md "SQL functions"): edit it in place, keep every
-- statement re-runnable (CREATE OR REPLACE).
--
-- The hot tables have no foreign keys (drizzle/0009: each was an SPI query and a parent row lock per
-- lead). The rules they kept: writers hold each source with a shared advisory lock (`source:<id>`)
-- and skip items whose source is gone; a deleted source waits for those writers (this BEFORE DELETE
-- trigger, exclusive lock on the same key), then its leads keep their data without a source and
-- its delivery logs and its rate-limit window go (AFTER DELETE); a deleted organization takes its
-- leads with it.
-- Its leads' `lead.created` events still in the fan-out queue (drizzle/0021) get their message
-- first, with the source as it was (a queued event's message is otherwise written by the worker,
-- which would find no source to name); releasing the leads then copies each lead into its message
-- (leads_keep_event_snapshot).
-- History: drizzle/0009, 0013 (the window), 0021 (the queued events' messages).
CREATE OR REPLACE FUNCTION webhook_sources_release_rows() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM webhook_sources_write_queued_events(OLD.id, OLD.name);
  UPDATE leads SET source_id = NULL WHERE source_id = OLD.id;
  DELETE FROM delivery_logs WHERE source_id = OLD.id;
  DELETE FROM inbound_rate_windows WHERE source_id = OLD.id;
  RETURN NULL;
END;
$$;
--> statement-breakpoint
CREATE OR REPLACE TRIGGER webhook_sources_release_rows AFTER DELETE ON webhook_sources
  FOR EACH ROW EXECUTE FUNCTION webhook_sources_release_rows();
