-- Budgets and alerts (CONTRACT §6). Each level fires once per account and month across all
-- sidecars: the primary key of alert_levels_fired decides, and only the statement that inserted
-- that row enqueues the deliveries (one per channel) into the alert_deliveries outbox.

CREATE TABLE budgets (
  account_id  uuid PRIMARY KEY REFERENCES accounts (id) ON DELETE CASCADE,
  monthly_usd numeric(20,8) NOT NULL CHECK (monthly_usd > 0),
  hard_cap    boolean NOT NULL DEFAULT false,   -- enforced only while the plan has plans.hard_cap
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE alert_channels (
  id              text PRIMARY KEY CHECK (id ~ '^[0-9a-f]{12}$'),
  account_id      uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  kind            text NOT NULL CHECK (kind IN ('slack', 'teams', 'email', 'webhook')),
  target          text NOT NULL,                 -- URL, or the e-mail address
  secret          text,                          -- webhook signing secret; never printed after `alerts add`
  created_at      timestamptz NOT NULL DEFAULT now(),
  last_status     text CHECK (last_status IN ('delivered', 'retrying', 'failed')),
  last_detail     text,                          -- "HTTP 200", "HTTP 500: …", "connect ECONNREFUSED …"
  last_attempt_at timestamptz,
  CHECK ((kind = 'webhook') = (secret IS NOT NULL))
);
CREATE INDEX alert_channels_account ON alert_channels (account_id);

-- month is 'YYYY-MM' (UTC): a new month starts with no levels fired.
CREATE TABLE alert_levels_fired (
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  month      text NOT NULL CHECK (month ~ '^\d{4}-\d{2}$'),
  level      smallint NOT NULL CHECK (level IN (50, 80, 100)),
  event_id   uuid NOT NULL UNIQUE,               -- the alert's id: Meter-Event-Id on every channel and retry
  spend      numeric(20,8) NOT NULL,
  budget     numeric(20,8) NOT NULL,
  fired_at   timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (account_id, month, level)
);

-- The outbox: one row per alert × channel. next_attempt_at doubles as the claim lease: a claim
-- moves it forward, so a sidecar that dies mid-send leaves the row due again later.
CREATE TABLE alert_deliveries (
  id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  event_id        uuid NOT NULL,
  channel_id      text NOT NULL REFERENCES alert_channels (id) ON DELETE CASCADE,
  account_id      uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  payload         jsonb NOT NULL,                -- the alert; money as decimal strings (exact)
  status          text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed')),
  attempts        integer NOT NULL DEFAULT 0,
  next_attempt_at timestamptz NOT NULL DEFAULT now(),
  created_at      timestamptz NOT NULL DEFAULT now(),
  delivered_at    timestamptz,
  last_error      text,
  UNIQUE (event_id, channel_id)
);
CREATE INDEX alert_deliveries_due ON alert_deliveries (next_attempt_at, id) WHERE status = 'pending';
-- A channel receives its alerts in order: only its oldest pending delivery is ever claimed.
CREATE INDEX alert_deliveries_channel_pending ON alert_deliveries (channel_id, id) WHERE status = 'pending';

-- The delivery log: every attempt, outbox deliveries and `meter alerts test` alike.
CREATE TABLE alert_delivery_attempts (
  id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  delivery_id  bigint REFERENCES alert_deliveries (id) ON DELETE CASCADE,   -- NULL: a test message
  channel_id   text NOT NULL REFERENCES alert_channels (id) ON DELETE CASCADE,
  attempted_at timestamptz NOT NULL DEFAULT now(),
  ok           boolean NOT NULL,
  status_code  integer,                          -- HTTP status, or the SMTP reply code
  error        text,
  duration_ms  double precision NOT NULL
);
CREATE INDEX alert_delivery_attempts_delivery ON alert_delivery_attempts (delivery_id);
CREATE INDEX alert_delivery_attempts_channel ON alert_delivery_attempts (channel_id, attempted_at);
