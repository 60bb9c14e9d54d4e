CREATE TABLE "delivery_log_hourly" (
	"source_id" uuid NOT NULL,
	"hour" timestamp with time zone NOT NULL,
	"outcome" text NOT NULL,
	"http_status" smallint NOT NULL,
	"reason" text DEFAULT '' NOT NULL,
	"requests" integer NOT NULL,
	CONSTRAINT "delivery_log_hourly_source_id_hour_outcome_http_status_reason_pk" PRIMARY KEY("source_id","hour","outcome","http_status","reason")
);
--> statement-breakpoint
CREATE TABLE "delivery_log_latency_hourly" (
	"source_id" uuid NOT NULL,
	"hour" timestamp with time zone NOT NULL,
	"bucket" smallint NOT NULL,
	"requests" integer NOT NULL,
	CONSTRAINT "delivery_log_latency_hourly_source_id_hour_bucket_pk" PRIMARY KEY("source_id","hour","bucket")
);
--> statement-breakpoint
CREATE TABLE "delivery_log_rollup_watermarks" (
	"source_id" uuid PRIMARY KEY NOT NULL,
	"rolled_until" timestamp with time zone NOT NULL
);
--> statement-breakpoint
ALTER TABLE "delivery_log_hourly" ADD CONSTRAINT "delivery_log_hourly_source_id_webhook_sources_id_fk" FOREIGN KEY ("source_id") REFERENCES "public"."webhook_sources"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "delivery_log_latency_hourly" ADD CONSTRAINT "delivery_log_latency_hourly_source_id_webhook_sources_id_fk" FOREIGN KEY ("source_id") REFERENCES "public"."webhook_sources"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "delivery_log_rollup_watermarks" ADD CONSTRAINT "delivery_log_rollup_watermarks_source_id_webhook_sources_id_fk" FOREIGN KEY ("source_id") REFERENCES "public"."webhook_sources"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "delivery_log_hourly_hour_idx" ON "delivery_log_hourly" USING btree ("hour");--> statement-breakpoint
CREATE INDEX "delivery_log_latency_hourly_hour_idx" ON "delivery_log_latency_hourly" USING btree ("hour");--> statement-breakpoint
CREATE INDEX "delivery_logs_source_outcome_received_idx" ON "delivery_logs" USING btree ("source_id","outcome","received_at" DESC NULLS LAST,"id" DESC NULLS LAST);