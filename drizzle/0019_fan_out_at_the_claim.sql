-- Fan-out at the claim: ingest_leads() writes a lead event's message only, marked fan_out_pending,
-- and the delivery worker creates one delivery per endpoint that takes it when it first takes the
-- message (DeliveryQueueRepository.fanOut). The lead's transaction no longer writes a delivery row
-- (a heap tuple and two b-tree entries per endpoint) but one entry of this partial index. Messages
-- written before this migration already have their deliveries: false.
-- docs/webhooks.md "Cost on the lead path", docs/benchmarks.md for what it measured.
ALTER TABLE "webhook_messages" ADD COLUMN "fan_out_pending" boolean DEFAULT false NOT NULL;--> statement-breakpoint
CREATE INDEX "webhook_messages_fan_out_idx" ON "webhook_messages" USING btree ("id") WHERE "webhook_messages"."fan_out_pending";