-- Plans, accounts and service keys: the unit that keys, budgets and analytics belong to.

CREATE TABLE plans (
  name                    text PRIMARY KEY,
  monthly_call_quota      integer CHECK (monthly_call_quota > 0),   -- NULL: no quota
  max_active_keys         integer NOT NULL CHECK (max_active_keys > 0),
  raw_retention_days      integer NOT NULL CHECK (raw_retention_days > 0),
  rollup_retention_months integer NOT NULL DEFAULT 13 CHECK (rollup_retention_months > 0),
  rate_limit_per_minute   integer NOT NULL CHECK (rate_limit_per_minute > 0),
  analytics               text[]  NOT NULL,                          -- endpoints the plan includes
  hard_cap                boolean NOT NULL,                          -- hard spending cap available
  updated_at              timestamptz NOT NULL DEFAULT now()
);

INSERT INTO plans (name, monthly_call_quota, max_active_keys, raw_retention_days, rate_limit_per_minute, analytics, hard_cap)
VALUES ('free', 10000, 2, 7, 60, '{summary,daily}', false),
       ('pro', NULL, 25, 90, 3000, '{summary,daily,by-tag,events}', true);

CREATE TABLE accounts (
  id         uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  name       text NOT NULL UNIQUE CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$'),
  plan       text NOT NULL DEFAULT 'free' REFERENCES plans (name),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);

-- A key is `mk_<id>_<secret>`; only a SHA-256 of the secret is kept.
CREATE TABLE api_keys (
  id          text PRIMARY KEY CHECK (id ~ '^[0-9a-f]{12}$'),
  account_id  uuid NOT NULL REFERENCES accounts (id),
  name        text,
  secret_hash bytea NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  expires_at  timestamptz,            -- end of a rotation's grace period
  revoked_at  timestamptz,
  rotated_to  text REFERENCES api_keys (id),
  updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX api_keys_account ON api_keys (account_id);
-- Sidecars poll for changed keys (revocations must reach every sidecar within 5 s).
CREATE INDEX api_keys_updated ON api_keys (updated_at);

-- One row per proxied call. Event ids come from the daemon and are reused on retry, so a
-- replayed batch is a no-op (ON CONFLICT DO NOTHING).
CREATE TABLE usage_events (
  time                timestamptz NOT NULL,
  event_id            uuid NOT NULL,
  account_id          uuid NOT NULL,
  key_id              text NOT NULL,
  provider            text NOT NULL,
  model               text NOT NULL,
  requested_model     text,
  status              smallint NOT NULL,
  input_tokens        bigint NOT NULL DEFAULT 0,
  output_tokens       bigint NOT NULL DEFAULT 0,
  cached_input_tokens bigint NOT NULL DEFAULT 0,
  cache_write_tokens  bigint NOT NULL DEFAULT 0,
  reasoning_tokens    bigint NOT NULL DEFAULT 0,
  cost                numeric(20,8) NOT NULL DEFAULT 0,
  unpriced            boolean NOT NULL DEFAULT false,
  price_version       text NOT NULL,
  usage_source        text NOT NULL CHECK (usage_source IN ('provider', 'estimated', 'none')),
  latency_ms          double precision NOT NULL,
  ttfb_ms             double precision,
  stream              boolean NOT NULL,
  tags                jsonb NOT NULL DEFAULT '{}',
  provider_cost_ticks bigint,
  PRIMARY KEY (time, event_id)
);
-- Per-account reads, newest first (raw events listing, retention).
CREATE INDEX usage_events_account_time ON usage_events (account_id, time DESC, event_id DESC);
