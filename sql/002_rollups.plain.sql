-- Rollups that analytics read. On PostgreSQL and the embedded store they are tables upserted in
-- the same statement as each batch insert; on TimescaleDB the same names are continuous aggregates.

CREATE TABLE usage_daily (
  account_id          uuid NOT NULL,
  day                 date NOT NULL,
  provider            text NOT NULL,
  model               text NOT NULL,
  spend               numeric(20,8) NOT NULL DEFAULT 0,
  requests            bigint NOT NULL DEFAULT 0,
  input_tokens        bigint NOT NULL DEFAULT 0,
  output_tokens       bigint NOT NULL DEFAULT 0,
  cached_input_tokens bigint NOT NULL DEFAULT 0,
  cache_write_tokens  bigint NOT NULL DEFAULT 0,
  reasoning_tokens    bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (account_id, day, provider, model)
);

CREATE TABLE usage_tag_daily (
  account_id uuid NOT NULL,
  day        date NOT NULL,
  tag_key    text NOT NULL,
  tag_value  text NOT NULL,
  spend      numeric(20,8) NOT NULL DEFAULT 0,
  requests   bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (account_id, day, tag_key, tag_value)
);
