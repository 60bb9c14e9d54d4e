-- A lead event (lead.created, lead.updated) keeps the lead as its transaction left it in typed
-- columns instead of a built jsonb payload: ~250 bytes a message instead of ~680, and
-- ingest_leads() neither builds nor writes the JSON on the lead path. Its `data` is rendered when
-- read by webhook_message_payload() (drizzle/functions), the same JSON the payload held; messages
-- written before keep their payload and are rendered from it. Every other event keeps `payload`.
-- docs/webhooks.md "Cost on the lead path", docs/benchmarks.md for what it measured.
ALTER TABLE "webhook_messages" ALTER COLUMN "payload" DROP NOT NULL;--> statement-breakpoint
ALTER TABLE "webhook_messages" ADD COLUMN "lead_id" uuid;--> statement-breakpoint
ALTER TABLE "webhook_messages" ADD COLUMN "lead_source_id" uuid;--> statement-breakpoint
ALTER TABLE "webhook_messages" ADD COLUMN "lead_first_name" text;--> statement-breakpoint
ALTER TABLE "webhook_messages" ADD COLUMN "lead_last_name" text;--> statement-breakpoint
ALTER TABLE "webhook_messages" ADD COLUMN "lead_email" text;--> statement-breakpoint
ALTER TABLE "webhook_messages" ADD COLUMN "lead_phone_raw" text;--> statement-breakpoint
ALTER TABLE "webhook_messages" ADD COLUMN "lead_phone_e164" text;--> statement-breakpoint
ALTER TABLE "webhook_messages" ADD COLUMN "lead_status" text;--> statement-breakpoint
ALTER TABLE "webhook_messages" ADD COLUMN "lead_custom_fields" jsonb;--> statement-breakpoint
ALTER TABLE "webhook_messages" ADD COLUMN "lead_attribution" jsonb;--> statement-breakpoint
ALTER TABLE "webhook_messages" ADD COLUMN "lead_created_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "webhook_messages" ADD COLUMN "lead_updated_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "webhook_messages" ADD COLUMN "source_id" uuid;--> statement-breakpoint
ALTER TABLE "webhook_messages" ADD COLUMN "source_name" text;--> statement-breakpoint
ALTER TABLE "webhook_messages" ADD CONSTRAINT "webhook_messages_payload_or_lead" CHECK ("webhook_messages"."payload" is not null or "webhook_messages"."lead_id" is not null);