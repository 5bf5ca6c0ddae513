-- TimescaleDB mode. Every database starts from the same base schema (001–019, rollups as
-- tables); this migration turns it into TimescaleDB mode, on a new database right after the
-- base and on a plain one through `meter migrate --to-timescale`. One transaction: a failure
-- leaves the plain database as it was.
--
-- usage_events becomes a hypertable of 1-day chunks. usage_daily and usage_tag_daily become
-- real-time continuous aggregates with the plain tables' names, columns and types (sums in
-- NUMERIC, which cannot overflow: sql/081), plus the
-- trailing `bucket` an aggregate must expose. `day` is a real date computed in UTC, so date
-- comparisons never depend on the session's TimeZone. The writer then only inserts events.
--
-- A plain database may hold rollups that its raw events no longer give: days whose events
-- retention deleted, and tag values over the plain rollup's per-day cap. What the rollups hold
-- beyond what the events give is kept in usage_daily_carried / usage_tag_daily_carried, and the
-- names usage_daily / usage_tag_daily become views adding them to the aggregates (renamed
-- *_agg), summed per key: each answer stays what it was. When the events
-- give exactly the rollups (a new database), no such rows exist and the aggregates keep the
-- names themselves.

CREATE EXTENSION IF NOT EXISTS timescaledb;

SELECT create_hypertable('usage_events', by_range('time', INTERVAL '1 day'), migrate_data => true);

-- Chunks past the shortest plan retention are compressed by the daemon (src/store/timescale).
ALTER TABLE usage_events SET (
  timescaledb.compress,
  timescaledb.compress_segmentby = 'account_id',
  timescaledb.compress_orderby = 'time DESC, event_id DESC'
);

ALTER TABLE usage_daily RENAME TO usage_daily_plain;
ALTER TABLE usage_tag_daily RENAME TO usage_tag_daily_plain;

-- The rollups minus what the events give, per row; zero rows are left out.
CREATE TABLE usage_daily_carried AS
WITH ev AS (
  SELECT account_id, (time AT TIME ZONE 'UTC')::date AS day, provider, model, sum(cost) AS spend, count(*) AS requests,
    sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens, sum(cached_input_tokens) AS cached_input_tokens,
    sum(cache_write_tokens) AS cache_write_tokens, sum(reasoning_tokens) AS reasoning_tokens
  FROM usage_events GROUP BY 1, 2, 3, 4
), d AS (
  SELECT account_id, day, provider, model,
    coalesce(p.spend, 0) - coalesce(ev.spend, 0) AS spend,
    coalesce(p.requests, 0) - coalesce(ev.requests, 0) AS requests,
    coalesce(p.input_tokens, 0) - coalesce(ev.input_tokens, 0) AS input_tokens,
    coalesce(p.output_tokens, 0) - coalesce(ev.output_tokens, 0) AS output_tokens,
    coalesce(p.cached_input_tokens, 0) - coalesce(ev.cached_input_tokens, 0) AS cached_input_tokens,
    coalesce(p.cache_write_tokens, 0) - coalesce(ev.cache_write_tokens, 0) AS cache_write_tokens,
    coalesce(p.reasoning_tokens, 0) - coalesce(ev.reasoning_tokens, 0) AS reasoning_tokens
  FROM usage_daily_plain p FULL JOIN ev USING (account_id, day, provider, model)
)
SELECT account_id, day, provider, model, spend::numeric AS spend, requests::bigint AS requests,
  input_tokens::numeric AS input_tokens, output_tokens::numeric AS output_tokens,
  cached_input_tokens::numeric AS cached_input_tokens, cache_write_tokens::numeric AS cache_write_tokens,
  reasoning_tokens::numeric AS reasoning_tokens
FROM d
WHERE spend <> 0 OR requests <> 0 OR input_tokens <> 0 OR output_tokens <> 0 OR cached_input_tokens <> 0
  OR cache_write_tokens <> 0 OR reasoning_tokens <> 0;

CREATE TABLE usage_tag_daily_carried AS
WITH ev AS (
  SELECT e.account_id, (e.time AT TIME ZONE 'UTC')::date AS day, t.key AS tag_key, t.value AS tag_value,
    sum(e.cost) AS spend, count(*) AS requests
  FROM usage_events e CROSS JOIN LATERAL jsonb_each_text(e.tags) AS t(key, value) GROUP BY 1, 2, 3, 4
), d AS (
  SELECT account_id, day, tag_key, tag_value,
    coalesce(p.spend, 0) - coalesce(ev.spend, 0) AS spend,
    coalesce(p.requests, 0) - coalesce(ev.requests, 0) AS requests
  FROM usage_tag_daily_plain p FULL JOIN ev USING (account_id, day, tag_key, tag_value)
)
SELECT account_id, day, tag_key, tag_value, spend::numeric AS spend, requests::bigint AS requests
FROM d WHERE spend <> 0 OR requests <> 0;

DROP TABLE usage_daily_plain;
DROP TABLE usage_tag_daily_plain;

-- One shape or the other; the SQL of both aggregates is the same.
DO $$
DECLARE
  carried boolean := EXISTS (SELECT 1 FROM usage_daily_carried) OR EXISTS (SELECT 1 FROM usage_tag_daily_carried);
  daily text := CASE WHEN carried THEN 'usage_daily_agg' ELSE 'usage_daily' END;
  tags text := CASE WHEN carried THEN 'usage_tag_daily_agg' ELSE 'usage_tag_daily' END;
BEGIN
  EXECUTE format($sql$
    CREATE MATERIALIZED VIEW %I WITH (timescaledb.continuous, timescaledb.materialized_only = false) AS
    SELECT account_id,
      (time_bucket('1 day', time) AT TIME ZONE 'UTC')::date AS day,
      provider, model,
      sum(cost) AS spend,
      count(*) AS requests,
      sum(input_tokens) AS input_tokens,
      sum(output_tokens) AS output_tokens,
      sum(cached_input_tokens) AS cached_input_tokens,
      sum(cache_write_tokens) AS cache_write_tokens,
      sum(reasoning_tokens) AS reasoning_tokens,
      time_bucket('1 day', time) AS bucket
    FROM usage_events
    GROUP BY account_id, time_bucket('1 day', time), provider, model
    WITH NO DATA $sql$, daily);

  -- No per-day cap on tag values here: an aggregate cannot rank rows (README "Storage").
  EXECUTE format($sql$
    CREATE MATERIALIZED VIEW %I WITH (timescaledb.continuous, timescaledb.materialized_only = false) AS
    SELECT e.account_id,
      (time_bucket('1 day', e.time) AT TIME ZONE 'UTC')::date AS day,
      t.key AS tag_key, t.value AS tag_value,
      sum(e.cost) AS spend,
      count(*) AS requests,
      time_bucket('1 day', e.time) AS bucket
    FROM usage_events e CROSS JOIN LATERAL jsonb_each_text(e.tags) AS t(key, value)
    GROUP BY e.account_id, time_bucket('1 day', e.time), t.key, t.value
    WITH NO DATA $sql$, tags);

  -- by-tag reads one key of one account over a period (as sql/003 on the plain table).
  EXECUTE format('CREATE INDEX %I ON %I (account_id, tag_key, day)', tags || '_account_key_day', tags);

  IF carried THEN
    -- One row per key, as in the plain tables: a carried row can cancel an aggregate row out
    -- (a tag value the plain rollup had counted under its overflow row).
    CREATE VIEW usage_daily AS
      SELECT account_id, day, provider, model, sum(spend) AS spend, sum(requests)::bigint AS requests,
        sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens,
        sum(cached_input_tokens) AS cached_input_tokens, sum(cache_write_tokens) AS cache_write_tokens,
        sum(reasoning_tokens) AS reasoning_tokens, min(bucket) AS bucket
      FROM (
        SELECT account_id, day, provider, model, spend, requests, input_tokens, output_tokens,
          cached_input_tokens, cache_write_tokens, reasoning_tokens, bucket FROM usage_daily_agg
        UNION ALL
        SELECT account_id, day, provider, model, spend, requests, input_tokens, output_tokens,
          cached_input_tokens, cache_write_tokens, reasoning_tokens, (day::timestamp AT TIME ZONE 'UTC')
        FROM usage_daily_carried
      ) AS u
      GROUP BY account_id, day, provider, model
      HAVING sum(requests) <> 0 OR sum(spend) <> 0;
    CREATE VIEW usage_tag_daily AS
      SELECT account_id, day, tag_key, tag_value, sum(spend) AS spend, sum(requests)::bigint AS requests,
        min(bucket) AS bucket
      FROM (
        SELECT account_id, day, tag_key, tag_value, spend, requests, bucket FROM usage_tag_daily_agg
        UNION ALL
        SELECT account_id, day, tag_key, tag_value, spend, requests, (day::timestamp AT TIME ZONE 'UTC')
        FROM usage_tag_daily_carried
      ) AS u
      GROUP BY account_id, day, tag_key, tag_value
      HAVING sum(requests) <> 0 OR sum(spend) <> 0;
    CREATE INDEX usage_daily_carried_account_day ON usage_daily_carried (account_id, day);
    CREATE INDEX usage_tag_daily_carried_account_key_day ON usage_tag_daily_carried (account_id, tag_key, day);
  ELSE
    DROP TABLE usage_daily_carried;
    DROP TABLE usage_tag_daily_carried;
  END IF;
END $$;
