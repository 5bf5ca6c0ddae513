-- TimescaleDB mode: /analytics/events?tag=k:v in compressed chunks. Compressed chunks have no
-- GIN index (sql/003's usage_events_account_tags reaches only the uncompressed ones), so a rare
-- tag decompressed the account's whole history; and fetching the matches from usage_events by
-- key still plans and decompresses one 1-day chunk per match. usage_event_tags keeps, beside
-- the hypertable, each event once per string tag with the columns the events endpoint shows:
-- a hypertable of 7-day chunks, compressed with the tag in `segmentby`, so one tag of one
-- account is one short index range in a handful of chunks, compressed or not.
-- src/analytics/events-query.ts reads it for every tag filter in this mode. Retention drops
-- and compresses its chunks with usage_events' (src/store/timescale/maintenance.ts).
CREATE TABLE usage_event_tags (
  account_id          uuid NOT NULL,
  tag_key             text NOT NULL,
  tag_value           text NOT NULL,
  time                timestamptz NOT NULL,
  event_id            uuid NOT NULL,
  key_id              text NOT NULL,
  provider            text NOT NULL,
  model               text NOT NULL,
  requested_model     text,
  status              smallint NOT NULL,
  input_tokens        bigint NOT NULL,
  output_tokens       bigint NOT NULL,
  cached_input_tokens bigint NOT NULL,
  cache_write_tokens  bigint NOT NULL,
  reasoning_tokens    bigint NOT NULL,
  cost                numeric(20,8) NOT NULL,
  price_version       text NOT NULL,
  usage_source        text NOT NULL,
  latency_ms          double precision NOT NULL,
  ttfb_ms             double precision,
  stream              boolean NOT NULL,
  tags                jsonb NOT NULL,
  service_tier        text,
  units               jsonb
);
SELECT create_hypertable('usage_event_tags', by_range('time', INTERVAL '7 days'), create_default_indexes => false);
CREATE INDEX usage_event_tags_lookup ON usage_event_tags (account_id, tag_key, tag_value, time DESC, event_id DESC);
ALTER TABLE usage_event_tags SET (
  timescaledb.compress,
  timescaledb.compress_segmentby = 'account_id, tag_key, tag_value',
  timescaledb.compress_orderby = 'time DESC, event_id DESC'
);

-- An event's copies, one per string tag: events?tag=k:v means `tags @> {"k": "v"}`, a string.
-- A column added to usage_events later and shown by the events endpoint is added here too.
CREATE FUNCTION usage_event_tag_copies(e usage_events) RETURNS SETOF usage_event_tags LANGUAGE sql STABLE AS $$
  SELECT e.account_id, t.key, t.value #>> '{}', e.time, e.event_id, e.key_id, e.provider, e.model,
    e.requested_model, e.status, e.input_tokens, e.output_tokens, e.cached_input_tokens,
    e.cache_write_tokens, e.reasoning_tokens, e.cost, e.price_version, e.usage_source, e.latency_ms,
    e.ttfb_ms, e.stream, e.tags, e.service_tier, e.units
  FROM jsonb_each(e.tags) AS t(key, value) WHERE jsonb_typeof(t.value) = 'string'
$$;

-- Kept by the statements that write usage_events, whichever sidecar or version runs them: the
-- rows an INSERT really inserted (a replay's ON CONFLICT DO NOTHING inserts none, so adds none),
-- and an UPDATE's new rows in place of the old (`meter pricing reprice`). Statement triggers
-- over transition tables: one set-based insert per batch. TimescaleDB mode deletes no events
-- (retention drops chunks, of both tables).
CREATE FUNCTION usage_event_tags_sync() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'UPDATE' THEN
    DELETE FROM usage_event_tags u USING old_rows o CROSS JOIN LATERAL jsonb_each_text(o.tags) AS t(key, value)
      WHERE u.account_id = o.account_id AND u.tag_key = t.key AND u.tag_value = t.value
        AND u.time = o.time AND u.event_id = o.event_id;
  END IF;
  INSERT INTO usage_event_tags SELECT c.* FROM new_rows e CROSS JOIN LATERAL usage_event_tag_copies(e) AS c;
  RETURN NULL;
END $$;
CREATE TRIGGER usage_event_tags_insert AFTER INSERT ON usage_events
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION usage_event_tags_sync();
CREATE TRIGGER usage_event_tags_update AFTER UPDATE ON usage_events
  REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION usage_event_tags_sync();

-- A database converted with events already in it.
INSERT INTO usage_event_tags SELECT c.* FROM usage_events e CROSS JOIN LATERAL usage_event_tag_copies(e) AS c;
