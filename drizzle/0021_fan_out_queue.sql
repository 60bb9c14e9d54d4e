-- The fan-out queue: ingest_leads() marks a lead event by its id alone in webhook_fan_out_queue
-- (a 16-byte key, one b-tree entry) instead of writing its message with fan_out_pending (a ~150-byte
-- row, its key and the fan-out index's entry): a created lead's message is written by the worker's
-- fan-out from the lead row, an updated lead's still with the lead (its merge is the snapshot).
-- The events not yet fanned out move to the queue; their messages stay as they are and the
-- fan-out takes them as written (docs/webhooks.md "Cost on the lead path").
CREATE TABLE "webhook_fan_out_queue" (
	"id" uuid PRIMARY KEY NOT NULL
);
--> statement-breakpoint
INSERT INTO "webhook_fan_out_queue" ("id") SELECT "id" FROM "webhook_messages" WHERE "fan_out_pending";--> statement-breakpoint
DROP INDEX "webhook_messages_fan_out_idx";--> statement-breakpoint
ALTER TABLE "webhook_messages" DROP COLUMN "fan_out_pending";
