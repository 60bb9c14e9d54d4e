-- webhook_endpoints_delete_deliveries: the AFTER DELETE trigger of webhook_endpoints, its one
-- current definition (a repeatable migration).
-- Applied after the versioned migrations whenever this file's checksum changes
-- (src/db/repeatable.ts, docs/architecture.md "SQL functions"): edit it in place, keep every
-- statement re-runnable (CREATE OR REPLACE).
--
-- webhook_deliveries has no foreign key to webhook_endpoints (drizzle/0015): its check was an SPI
-- query and a share lock of the one endpoint row per lead event written by ingest_leads(), which
-- concurrent groups turned into MultiXacts. The cascade it did is this trigger (an endpoint deleted
-- by hand or with its organization takes its deliveries, and their attempts by their own foreign
-- key). A group that read the endpoint before the delete and commits after it can still leave a
-- delivery of a deleted endpoint: the claim starts from enabled endpoints, so it is never sent,
-- and retention deletes it once it is older than LOG_RETENTION_DAYS whatever its status.
-- History: drizzle/0015.
CREATE OR REPLACE FUNCTION webhook_endpoints_delete_deliveries() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM webhook_deliveries WHERE endpoint_id = OLD.id;
  RETURN NULL;
END;
$$;
--> statement-breakpoint
CREATE OR REPLACE TRIGGER webhook_endpoints_delete_deliveries AFTER DELETE ON webhook_endpoints
  FOR EACH ROW EXECUTE FUNCTION webhook_endpoints_delete_deliveries();
