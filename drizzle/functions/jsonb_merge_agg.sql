-- jsonb_merge_agg(jsonb): its one current definition (a repeatable migration).
-- Applied after the versioned migrations whenever this file's checksum changes
-- (src/db/repeatable.ts, docs/architecture.md "SQL functions"): edit it in place, keep every
-- statement re-runnable (CREATE OR REPLACE).
--
-- custom_fields of several submissions merged in order, like successive `||` (ingest_leads() folds
-- the submissions of one group that update the same lead with it).
-- History: drizzle/0007.
CREATE OR REPLACE AGGREGATE jsonb_merge_agg(jsonb) (SFUNC = jsonb_concat, STYPE = jsonb, INITCOND = '{}');
