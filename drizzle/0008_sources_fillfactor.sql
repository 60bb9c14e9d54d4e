-- last_request_at is written for every active source every 5 s (src/modules/inbound/last-request.ts).
-- With full pages almost none of those updates were HOT: each one wrote a new row version on another
-- page plus four index entries, the table bloated (38 MB for 5,000 sources after a benchmark), and
-- one flush of 4,000 sources took 60-130 ms, which showed up as 100-500 ms stalls of the requests
-- waiting behind it. With room left on every page the updates stay on their page and touch no
-- index: 15 ms for the same flush. Existing pages keep their layout until rewritten (see README).
ALTER TABLE webhook_sources SET (fillfactor = 40);
