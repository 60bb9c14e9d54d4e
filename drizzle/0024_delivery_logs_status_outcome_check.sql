-- An entry answered 200 is any outcome but `rejected`; an entry of any other status is `rejected`.
-- Every entry has been written so since the first version of the inbound route; the check makes the
-- log list rely on it: a status filter reads only the ranges of the outcomes that status can have
-- (src/modules/delivery-logs/repository.ts), where it walked every other outcome's entries whole.
-- NOT VALID, as delivery_logs_outcome_check (drizzle/0023): new and updated rows are checked, the
-- existing ones are not scanned, so the migration holds its lock no longer than on an empty table.
ALTER TABLE "delivery_logs" ADD CONSTRAINT "delivery_logs_status_outcome_check" CHECK (("delivery_logs"."outcome" = 'rejected') = ("delivery_logs"."http_status" <> 200)) NOT VALID;
