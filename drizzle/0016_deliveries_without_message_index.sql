-- Only retention looked deliveries up by message_id alone; it now goes through the organization's
-- endpoints and the primary key (endpoint_id, message_id), and ingest_leads() no longer pays a
-- b-tree insert per lead event for it (docs/webhooks.md "Cost on the lead path").
DROP INDEX "webhook_deliveries_message_idx";