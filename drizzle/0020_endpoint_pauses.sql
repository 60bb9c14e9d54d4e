-- An endpoint's disabled spells, [from, until or null], so that the delivery worker's fan-out
-- (drizzle/0019), which runs after the lead's commit, gives a lead event to the endpoints that were
-- enabled at the event's time: one disabled meanwhile keeps what it took (as a pending delivery, or a
-- failed one when it was disabled for failing), one disabled then and enabled since gets nothing.
-- Endpoints disabled now are disabled since their last change, as far as the database knows.
-- docs/webhooks.md "Fan-out at the claim".
ALTER TABLE "webhook_endpoints" ADD COLUMN "pauses" jsonb DEFAULT '[]'::jsonb NOT NULL;--> statement-breakpoint
UPDATE "webhook_endpoints" SET "pauses" = jsonb_build_array(jsonb_build_array(to_jsonb("updated_at"), null)) WHERE NOT "enabled";
