-- Lead events cost the lead path less (docs/webhooks.md "Cost on the lead path"): ingest_leads()
-- writes a delivery per lead event, and its foreign key to webhook_endpoints was an SPI query and a
-- share lock of the one endpoint row per row (MultiXacts under concurrent groups). The cascade is
-- now the AFTER DELETE trigger webhook_endpoints_delete_deliveries (drizzle/functions/); a delivery
-- left by a group that raced an endpoint's delete is never claimed and goes with retention.
-- webhook_messages_organization_idx was read by no query.
ALTER TABLE "webhook_deliveries" DROP CONSTRAINT "webhook_deliveries_endpoint_id_webhook_endpoints_id_fk";
--> statement-breakpoint
DROP INDEX "webhook_messages_organization_idx";