-- organizations_delete_leads: the AFTER DELETE trigger of organizations, its one current
-- definition (a repeatable migration).
-- Applied after the versioned migrations whenever this file's checksum changes
-- (src/db/repeatable.ts, docs/architecture.md "SQL functions"): edit it in place, keep every
-- statement re-runnable (CREATE OR REPLACE).
--
-- The hot tables have no foreign keys (drizzle/0009: each was an SPI query and a parent row lock per
-- lead). The rules they kept: writers hold each source with a shared advisory lock (`source:<id>`)
-- and skip items whose source is gone; a deleted source waits for those writers (this BEFORE DELETE
-- trigger, exclusive lock on the same key), then its leads keep their data without a source and
-- its delivery logs go (AFTER DELETE); a deleted organization takes its leads with it.
-- History: drizzle/0009.
CREATE OR REPLACE FUNCTION organizations_delete_leads() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM leads WHERE organization_id = OLD.id;
  RETURN NULL;
END;
$$;
--> statement-breakpoint
CREATE OR REPLACE TRIGGER organizations_delete_leads AFTER DELETE ON organizations
  FOR EACH ROW EXECUTE FUNCTION organizations_delete_leads();
