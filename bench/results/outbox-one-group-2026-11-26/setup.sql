-- What d20cf5a's ingest_leads() writes and drizzle/0021 dropped: the messages' fan-out flag and index.
ALTER TABLE webhook_messages ADD COLUMN IF NOT EXISTS fan_out_pending boolean NOT NULL DEFAULT false;
CREATE INDEX IF NOT EXISTS webhook_messages_fan_out_idx ON webhook_messages (id) WHERE fan_out_pending;
