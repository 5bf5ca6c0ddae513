-- What is due to a billing link, recorded in the database before it is sent (src/billing): any
-- sidecar may send an item, a lease keeps two from sending it at once, and `sent` is set only
-- once the receiver acknowledged it, so a restart or kill -9 resends nothing acknowledged.
--   Stripe: one item per link, UTC minute and derivation (`seq` is the `<n>` of the identifier:
--   usage recorded late for a minute already derived is a further item of that minute).
--   CloudEvents: one item per usage event (`event_id`).
CREATE TABLE billing_items (
  id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  link_id         text NOT NULL REFERENCES billing_links (id) ON DELETE CASCADE,
  month           text NOT NULL CHECK (month ~ '^\d{4}-\d{2}$'),
  at              timestamptz NOT NULL,          -- Stripe: the minute's start; CloudEvents: the call's time
  seq             integer,                       -- Stripe only
  event_id        uuid,                          -- CloudEvents only
  cost            numeric NOT NULL,              -- metered, exact
  billed          numeric NOT NULL,              -- cost × (1 + markup ÷ 100), exact
  micros          bigint,                        -- Stripe: payload[value], whole micro-dollars
  data            jsonb,                         -- CloudEvents: the event's fields
  status          text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'sent', 'failed', 'expired')),
  attempts        integer NOT NULL DEFAULT 0,
  next_attempt_at timestamptz NOT NULL DEFAULT now(),
  last_error      text,
  sent_at         timestamptz,
  UNIQUE (link_id, at, seq),
  UNIQUE (link_id, event_id)
);
CREATE INDEX billing_items_due ON billing_items (next_attempt_at) WHERE status = 'pending';
CREATE INDEX billing_items_link_month ON billing_items (link_id, month);

-- The usage events already derived into items, per link: a pass looks back past its watermark
-- (a row's recorded_at is taken before its commit) and skips what is here. Pruned behind the
-- watermark.
CREATE TABLE billing_derived (
  link_id     text NOT NULL REFERENCES billing_links (id) ON DELETE CASCADE,
  event_id    uuid NOT NULL,
  recorded_at timestamptz NOT NULL,
  PRIMARY KEY (link_id, event_id)
);
CREATE INDEX billing_derived_recorded ON billing_derived (link_id, recorded_at);

-- Stripe's rounding carry per link and month: the marked-up cost derived so far (an integer count
-- of 1e-14 USD, exact) and the micro-dollars it was given, so each item's value is round(total after) − round(total before)
-- and a month's values add up to its marked-up cost rounded once.
CREATE TABLE billing_carry (
  link_id text NOT NULL REFERENCES billing_links (id) ON DELETE CASCADE,
  month   text NOT NULL,
  billed  numeric NOT NULL,
  micros  bigint NOT NULL,
  PRIMARY KEY (link_id, month)
);
