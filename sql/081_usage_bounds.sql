-- Usage a provider reported out of range (issue: 1e300 tokens was dead-lettered, 2^63-1024
-- overflowed the day's rollup and every later event of that account, day and model with it).
-- Counts are clamped to a billion per field before they reach SQL (src/providers/common.ts);
-- such an event keeps which fields were clamped and the raw figures here. NULL for every
-- normal event.
ALTER TABLE usage_events ADD COLUMN usage_raw jsonb;

-- The rollups add up without bound in every mode: NUMERIC cannot overflow, so no event can make
-- a day's row unwritable (or, in TimescaleDB mode, a day's aggregate unreadable). Both modes
-- keep the same columns and types.
DO $$
DECLARE
  kind text := (SELECT relkind FROM pg_class WHERE oid = to_regclass('usage_daily'))::text;
  carried boolean;
  daily text;
  tags text;
BEGIN
  IF kind = 'r' THEN
    -- Plain PostgreSQL and the embedded store: the rollups are tables.
    ALTER TABLE usage_daily
      ALTER COLUMN spend TYPE numeric,
      ALTER COLUMN input_tokens TYPE numeric,
      ALTER COLUMN output_tokens TYPE numeric,
      ALTER COLUMN cached_input_tokens TYPE numeric,
      ALTER COLUMN cache_write_tokens TYPE numeric,
      ALTER COLUMN reasoning_tokens TYPE numeric;
    ALTER TABLE usage_tag_daily ALTER COLUMN spend TYPE numeric;
    RETURN;
  END IF;
  IF kind IS NULL THEN
    RETURN;
  END IF;

  -- TimescaleDB: an aggregate's query cannot be changed, so both are made again without the
  -- bigint and numeric(20,8) casts of sql/020. What they hold beyond the raw events (days whose
  -- chunks retention dropped, rows carried from a plain database) is kept as carried rows first,
  -- exactly as sql/020 does, so every answer stays what it was.
  CREATE TABLE usage_daily_carried_next AS
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
    FROM usage_daily p FULL JOIN ev USING (account_id, day, provider, model)
  )
  SELECT account_id, day, provider, model, spend::numeric AS spend, requests::bigint AS requests,
    input_tokens::numeric AS input_tokens, output_tokens::numeric AS output_tokens,
    cached_input_tokens::numeric AS cached_input_tokens, cache_write_tokens::numeric AS cache_write_tokens,
    reasoning_tokens::numeric AS reasoning_tokens
  FROM d
  WHERE spend <> 0 OR requests <> 0 OR input_tokens <> 0 OR output_tokens <> 0 OR cached_input_tokens <> 0
    OR cache_write_tokens <> 0 OR reasoning_tokens <> 0;

  CREATE TABLE usage_tag_daily_carried_next AS
  WITH ev AS (
    SELECT e.account_id, (e.time AT TIME ZONE 'UTC')::date AS day, t.key AS tag_key, t.value AS tag_value,
      sum(e.cost) AS spend, count(*) AS requests
    FROM usage_events e CROSS JOIN LATERAL jsonb_each_text(e.tags) AS t(key, value) GROUP BY 1, 2, 3, 4
  ), d AS (
    SELECT account_id, day, tag_key, tag_value,
      coalesce(p.spend, 0) - coalesce(ev.spend, 0) AS spend,
      coalesce(p.requests, 0) - coalesce(ev.requests, 0) AS requests
    FROM usage_tag_daily p FULL JOIN ev USING (account_id, day, tag_key, tag_value)
  )
  SELECT account_id, day, tag_key, tag_value, spend::numeric AS spend, requests::bigint AS requests
  FROM d WHERE spend <> 0 OR requests <> 0;

  IF to_regclass('usage_daily_agg') IS NOT NULL THEN
    DROP VIEW usage_daily;
    DROP VIEW usage_tag_daily;
    DROP MATERIALIZED VIEW usage_daily_agg;
    DROP MATERIALIZED VIEW usage_tag_daily_agg;
    DROP TABLE usage_daily_carried;
    DROP TABLE usage_tag_daily_carried;
  ELSE
    DROP MATERIALIZED VIEW usage_daily;
    DROP MATERIALIZED VIEW usage_tag_daily;
  END IF;
  ALTER TABLE usage_daily_carried_next RENAME TO usage_daily_carried;
  ALTER TABLE usage_tag_daily_carried_next RENAME TO usage_tag_daily_carried;

  carried := EXISTS (SELECT 1 FROM usage_daily_carried) OR EXISTS (SELECT 1 FROM usage_tag_daily_carried);
  daily := CASE WHEN carried THEN 'usage_daily_agg' ELSE 'usage_daily' END;
  tags := CASE WHEN carried THEN 'usage_tag_daily_agg' ELSE 'usage_tag_daily' END;

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

  EXECUTE format('CREATE INDEX %I ON %I (account_id, tag_key, day)', tags || '_account_key_day', tags);

  IF carried THEN
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
