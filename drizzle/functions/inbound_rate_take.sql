-- inbound_rate_take(jsonb): its one current definition (a repeatable migration).
-- Applied after the versioned migrations whenever this file's checksum changes
-- (src/db/repeatable.ts, docs/architecture.md "SQL functions"): edit it in place, keep every
-- statement re-runnable (CREATE OR REPLACE).
--
-- The per-key limit of the inbound route (spec §8: 60 requests a minute per source), exact across
-- replicas because PostgreSQL holds it (docs/architecture.md "One round trip"). Items:
-- [{idx, source_id, received_at}], each a request that counts against its source. The caller holds
-- each source's advisory lock `source:<id>` EXCLUSIVELY (ingest_leads, log_deliveries,
-- count_inbound_requests), so the read and the write of a window cannot interleave. Per source, in
-- idx order, as the Redis script did per request: hits at or before received_at - 60 s leave the
-- window; with 60 left the item is refused (allowed false, nothing recorded), else received_at is
-- recorded. Returns per item what the X-RateLimit headers say: remaining, and the milliseconds
-- until the oldest counted hit leaves the window (60,000 when this is the first). Items whose
-- source is gone are skipped (no row back; their caller answers 404).
-- History: new with drizzle/0013; hits in ascending order since drizzle/0017.
CREATE OR REPLACE FUNCTION inbound_rate_take(p_items jsonb)
  RETURNS TABLE (idx integer, allowed boolean, remaining integer, reset_ms integer)
LANGUAGE plpgsql AS $$
DECLARE
  c_limit CONSTANT integer := 60;
  c_window CONSTANT interval := interval '60 seconds';
  v_source uuid;
  v_hits timestamptz[];
  v_item record;
  v_oldest timestamptz;
BEGIN
  -- The common case, one request per source in the group (10,000 keys at ~1 request/s each): one
  -- statement for them all.
  RETURN QUERY
  WITH items AS (
    SELECT x.idx, x.source_id, x.received_at,
      count(*) OVER (PARTITION BY x.source_id) AS per_source
    FROM jsonb_to_recordset(p_items) AS x(idx integer, source_id uuid, received_at timestamptz)
    WHERE (SELECT true FROM webhook_sources s WHERE s.id = x.source_id)
  ),
  -- The window read by a scalar subquery: one primary-key probe per item whatever the table's
  -- statistics (a join was planned as a scan of every window while the table had none).
  probed AS MATERIALIZED (
    SELECT i.idx, i.source_id, i.received_at,
      COALESCE((SELECT w.hits FROM inbound_rate_windows w WHERE w.source_id = i.source_id), '{}') AS hits
    FROM items i
    WHERE i.per_source = 1
  ),
  -- Hits are kept in ascending order (drizzle/0017), so those that left the window are a prefix:
  -- width_bucket counts them by binary search and a slice keeps the rest, and the oldest kept is
  -- the first (filtering the array and taking its min cost ~20% more of this statement).
  windows AS MATERIALIZED (
    SELECT p.idx, p.source_id, p.received_at, p.hits[width_bucket(p.received_at - c_window, p.hits) + 1:] AS kept
    FROM probed p
  ),
  -- A hit older than the last kept one (two replicas commit out of time order) is put in its place.
  recorded AS (
    INSERT INTO inbound_rate_windows AS w (source_id, hits)
    SELECT k.source_id,
      CASE WHEN cardinality(k.kept) = 0 OR k.kept[cardinality(k.kept)] <= k.received_at THEN k.kept || k.received_at
        ELSE ARRAY(SELECT h FROM unnest(k.kept || k.received_at) h ORDER BY h) END
    FROM windows k WHERE cardinality(k.kept) < c_limit
    ON CONFLICT (source_id) DO UPDATE SET hits = excluded.hits
  )
  SELECT k.idx, cardinality(k.kept) < c_limit,
    greatest(0, c_limit - cardinality(k.kept) - CASE WHEN cardinality(k.kept) < c_limit THEN 1 ELSE 0 END),
    (extract(epoch FROM least(k.kept[1],
      CASE WHEN cardinality(k.kept) < c_limit THEN k.received_at END) + c_window - k.received_at) * 1000)::integer
  FROM windows k;

  -- Sources with several requests in the group: one after another, in idx order.
  -- A group of one item has none, so it skips the query: at 1,000 leads/s nearly every group is one
  -- item, and the query cost ~13 µs of such a call's ~340 (bench/ingest-sql-cpu.ts, docs/benchmarks.md).
  IF jsonb_array_length(p_items) > 1 THEN
    FOR v_source IN
      SELECT x.source_id FROM jsonb_to_recordset(p_items) AS x(source_id uuid)
      GROUP BY x.source_id HAVING count(*) > 1
    LOOP
      -- the source check once per source here, not once per item
      CONTINUE WHEN NOT EXISTS (SELECT 1 FROM webhook_sources s WHERE s.id = v_source);
      v_hits := COALESCE((SELECT w.hits FROM inbound_rate_windows w WHERE w.source_id = v_source), '{}');
      FOR v_item IN
        SELECT x.idx, x.received_at
        FROM jsonb_to_recordset(p_items) AS x(idx integer, source_id uuid, received_at timestamptz)
        WHERE x.source_id = v_source ORDER BY x.idx
      LOOP
        v_hits := ARRAY(SELECT h FROM unnest(v_hits) h WHERE h > v_item.received_at - c_window);
        v_oldest := (SELECT min(h) FROM unnest(v_hits) h);
        idx := v_item.idx;
        allowed := cardinality(v_hits) < c_limit;
        IF allowed THEN
          v_hits := v_hits || v_item.received_at;
          v_oldest := least(v_oldest, v_item.received_at);
        END IF;
        remaining := greatest(0, c_limit - cardinality(v_hits));
        reset_ms := (extract(epoch FROM v_oldest + c_window - v_item.received_at) * 1000)::integer;
        RETURN NEXT;
      END LOOP;
      -- in ascending order, as the statement above reads them (the group's items are in arrival order,
      -- which the clock need not follow)
      INSERT INTO inbound_rate_windows AS w (source_id, hits)
      VALUES (v_source, ARRAY(SELECT h FROM unnest(v_hits) h ORDER BY h))
        ON CONFLICT (source_id) DO UPDATE SET hits = excluded.hits;
    END LOOP;
  END IF;
END;
$$;
