-- Customer billing (CONTRACT §8): an account's metered cost, or one tag value's (a tenant), sent to
-- the system that invoices that customer. The Stripe secret key is never stored: only the
-- customer id, the receiver's address and what was sent.

-- A link: what is billed (the account, or one tag value of it) and where it goes. Unlinking stops
-- new usage from being billed; what was already recorded is still sent and stays in `status`.
CREATE TABLE billing_links (
  id           text PRIMARY KEY CHECK (id ~ '^bl[0-9a-f]{12}$'),
  account_id   uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  tag_key      text CHECK (tag_key ~ '^[A-Za-z0-9_.-]{1,64}$'),
  tag_value    text CHECK (length(tag_value) BETWEEN 1 AND 256),
  target       text NOT NULL CHECK (target IN ('stripe', 'cloudevents')),
  customer     text CHECK (customer ~ '^cus_[A-Za-z0-9]{1,64}$'),
  url          text CHECK (length(url) <= 2048),
  subject      text CHECK (length(subject) BETWEEN 1 AND 256),
  markup_pct   numeric(10,4) NOT NULL DEFAULT 0 CHECK (markup_pct >= 0 AND markup_pct <= 10000),
  created_at   timestamptz NOT NULL DEFAULT now(),
  unlinked_at  timestamptz,
  -- Usage recorded (usage_events.recorded_at, the database's clock) before this is derived.
  derived_to   timestamptz NOT NULL DEFAULT now(),
  last_error    text,
  last_error_at timestamptz,
  CHECK ((tag_key IS NULL) = (tag_value IS NULL)),
  CHECK (target <> 'stripe' OR (customer IS NOT NULL AND url IS NULL)),
  CHECK (target <> 'cloudevents' OR (url IS NOT NULL AND customer IS NULL))
);
CREATE INDEX billing_links_account ON billing_links (account_id);
