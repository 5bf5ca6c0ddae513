-- Quarter-hour rollups for budgets in any time zone (issue 30). A window of a zone starts at
-- that zone's local midnight, which is a UTC quarter-hour in every zone in force since 1979
-- (offsets and DST changes are whole quarter hours: Asia/Kolkata +5:30, Asia/Kathmandu +5:45,
-- Australia/Lord_Howe's 30-minute DST). So a window's exact spend is a sum of whole
-- quarter-hour buckets; src/budget/spend.ts adds raw events only for a partial bucket at an
-- edge, which today's zones never have.
--
-- usage_quarter_hour: per account, bucket, key, provider, reported and requested model (the
-- key, provider and model scopes, and the account scope). usage_tag_quarter_hour: per
-- account, bucket and tag (the tag scope; no per-day cap on values, unlike usage_tag_daily).
--
-- Plain PostgreSQL and the embedded store: tables kept by statement triggers on usage_events
-- (what an INSERT really inserted, and a re-price's change of cost). TimescaleDB: continuous
-- aggregates with the same names and columns (refreshed with the others by the daemon). A
-- plain database converted later keeps the trigger-kept tables, which stay exact there too.
DO $$
DECLARE
  kind text := (SELECT relkind FROM pg_class WHERE oid = to_regclass('usage_daily'))::text;
BEGIN
  IF kind = 'r' THEN
    CREATE TABLE usage_quarter_hour (
      account_id      uuid NOT NULL,
      bucket          timestamptz NOT NULL,
      key_id          text NOT NULL,
      provider        text NOT NULL,
      model           text NOT NULL,
      requested_model text NOT NULL,   -- '' when the call named none
      spend           numeric NOT NULL DEFAULT 0,
      requests        bigint NOT NULL DEFAULT 0,
      PRIMARY KEY (account_id, bucket, key_id, provider, model, requested_model)
    );
    CREATE TABLE usage_tag_quarter_hour (
      account_id uuid NOT NULL,
      bucket     timestamptz NOT NULL,
      tag_key    text NOT NULL,
      tag_value  text NOT NULL,
      spend      numeric NOT NULL DEFAULT 0,
      requests   bigint NOT NULL DEFAULT 0,
      PRIMARY KEY (account_id, tag_key, tag_value, bucket)
    );
    -- The daemon trims buckets older than the longest window (src/budget/monitor.ts).
    CREATE INDEX usage_quarter_hour_bucket ON usage_quarter_hour (bucket);
    CREATE INDEX usage_tag_quarter_hour_bucket ON usage_tag_quarter_hour (bucket);

    -- Rows in key order, so concurrent writers lock them in the same order.
    CREATE FUNCTION usage_quarter_hour_sync() RETURNS trigger LANGUAGE plpgsql AS $f$
    BEGIN
      IF TG_OP = 'INSERT' THEN
        INSERT INTO usage_quarter_hour AS q (account_id, bucket, key_id, provider, model, requested_model, spend, requests)
        SELECT account_id, date_bin('15 minutes', time, timestamptz '2000-01-01 00:00:00+00'), key_id, provider, model,
          coalesce(requested_model, ''), sum(cost), count(*)
        FROM new_rows GROUP BY 1, 2, 3, 4, 5, 6 ORDER BY 1, 2, 3, 4, 5, 6
        ON CONFLICT (account_id, bucket, key_id, provider, model, requested_model) DO UPDATE
          SET spend = q.spend + EXCLUDED.spend, requests = q.requests + EXCLUDED.requests;
        INSERT INTO usage_tag_quarter_hour AS q (account_id, bucket, tag_key, tag_value, spend, requests)
        SELECT e.account_id, date_bin('15 minutes', e.time, timestamptz '2000-01-01 00:00:00+00'), t.key, t.value,
          sum(e.cost), count(*)
        FROM new_rows e CROSS JOIN LATERAL jsonb_each_text(e.tags) AS t(key, value)
        GROUP BY 1, 2, 3, 4 ORDER BY 1, 3, 4, 2
        ON CONFLICT (account_id, tag_key, tag_value, bucket) DO UPDATE
          SET spend = q.spend + EXCLUDED.spend, requests = q.requests + EXCLUDED.requests;
      ELSE
        -- An UPDATE (meter pricing reprice) changes cost only: add the difference.
        INSERT INTO usage_quarter_hour AS q (account_id, bucket, key_id, provider, model, requested_model, spend, requests)
        SELECT n.account_id, date_bin('15 minutes', n.time, timestamptz '2000-01-01 00:00:00+00'), n.key_id, n.provider,
          n.model, coalesce(n.requested_model, ''), sum(n.cost - o.cost), 0
        FROM new_rows n JOIN old_rows o ON o.time = n.time AND o.event_id = n.event_id
        WHERE n.cost <> o.cost
        GROUP BY 1, 2, 3, 4, 5, 6 ORDER BY 1, 2, 3, 4, 5, 6
        ON CONFLICT (account_id, bucket, key_id, provider, model, requested_model) DO UPDATE
          SET spend = q.spend + EXCLUDED.spend;
        INSERT INTO usage_tag_quarter_hour AS q (account_id, bucket, tag_key, tag_value, spend, requests)
        SELECT n.account_id, date_bin('15 minutes', n.time, timestamptz '2000-01-01 00:00:00+00'), t.key, t.value,
          sum(n.cost - o.cost), 0
        FROM new_rows n JOIN old_rows o ON o.time = n.time AND o.event_id = n.event_id
          CROSS JOIN LATERAL jsonb_each_text(n.tags) AS t(key, value)
        WHERE n.cost <> o.cost
        GROUP BY 1, 2, 3, 4 ORDER BY 1, 3, 4, 2
        ON CONFLICT (account_id, tag_key, tag_value, bucket) DO UPDATE SET spend = q.spend + EXCLUDED.spend;
      END IF;
      RETURN NULL;
    END $f$;
    CREATE TRIGGER usage_quarter_hour_insert AFTER INSERT ON usage_events
      REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION usage_quarter_hour_sync();
    CREATE TRIGGER usage_quarter_hour_update AFTER UPDATE ON usage_events
      REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION usage_quarter_hour_sync();

    -- A database upgraded with events in it: what those events give (older buckets whose raw
    -- events retention deleted stay absent; budget windows reach back a quarter at most).
    INSERT INTO usage_quarter_hour (account_id, bucket, key_id, provider, model, requested_model, spend, requests)
    SELECT account_id, date_bin('15 minutes', time, timestamptz '2000-01-01 00:00:00+00'), key_id, provider, model,
      coalesce(requested_model, ''), sum(cost), count(*)
    FROM usage_events GROUP BY 1, 2, 3, 4, 5, 6;
    INSERT INTO usage_tag_quarter_hour (account_id, bucket, tag_key, tag_value, spend, requests)
    SELECT e.account_id, date_bin('15 minutes', e.time, timestamptz '2000-01-01 00:00:00+00'), t.key, t.value,
      sum(e.cost), count(*)
    FROM usage_events e CROSS JOIN LATERAL jsonb_each_text(e.tags) AS t(key, value) GROUP BY 1, 2, 3, 4;
    RETURN;
  END IF;
  IF kind IS NULL THEN
    RETURN;
  END IF;

  CREATE MATERIALIZED VIEW usage_quarter_hour WITH (timescaledb.continuous, timescaledb.materialized_only = false) AS
  SELECT account_id, time_bucket('15 minutes', time) AS bucket, key_id, provider, model,
    coalesce(requested_model, '') AS requested_model, sum(cost) AS spend, count(*) AS requests
  FROM usage_events
  GROUP BY account_id, time_bucket('15 minutes', time), key_id, provider, model, coalesce(requested_model, '')
  WITH NO DATA;
  CREATE MATERIALIZED VIEW usage_tag_quarter_hour WITH (timescaledb.continuous, timescaledb.materialized_only = false) AS
  SELECT e.account_id, time_bucket('15 minutes', e.time) AS bucket, t.key AS tag_key, t.value AS tag_value,
    sum(e.cost) AS spend, count(*) AS requests
  FROM usage_events e CROSS JOIN LATERAL jsonb_each_text(e.tags) AS t(key, value)
  GROUP BY e.account_id, time_bucket('15 minutes', e.time), t.key, t.value
  WITH NO DATA;
  CREATE INDEX usage_quarter_hour_account_bucket ON usage_quarter_hour (account_id, bucket);
  CREATE INDEX usage_tag_quarter_hour_account_tag ON usage_tag_quarter_hour (account_id, tag_key, tag_value, bucket);
END $$;
