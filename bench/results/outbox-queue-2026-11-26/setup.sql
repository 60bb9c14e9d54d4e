ALTER TABLE delivery_logs ADD COLUMN IF NOT EXISTS fan_out_pending boolean NOT NULL DEFAULT false;
CREATE INDEX IF NOT EXISTS delivery_logs_fan_out_idx ON delivery_logs (id) WHERE fan_out_pending;
CREATE TABLE IF NOT EXISTS webhook_fan_out_queue (id uuid PRIMARY KEY);
