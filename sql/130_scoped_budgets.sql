-- Budgets of every scope (CONTRACT §6, issue 30). The account's monthly budget stays in
-- `budgets` (meter budget set|show|clear, the hard cap, alert_levels_fired): it is the
-- account-scope, month-window, UTC budget. Every other budget is a row here; budget_definitions
-- shows both as one list, the account budget with the id 'acct_' + the first 12 hex digits of
-- its account's id.

-- A change a sidecar must see within 5 s bumps the change counter of sql/090_fleet.sql (its
-- triggers already cover budgets, accounts and plans).

CREATE TABLE scoped_budgets (
  id          text PRIMARY KEY CHECK (id ~ '^[0-9a-f]{12}$'),
  account_id  uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  scope_kind  text NOT NULL CHECK (scope_kind IN ('account', 'key', 'tag', 'model', 'provider')),
  scope_key   text CHECK (scope_key ~ '^[A-Za-z0-9_.-]{1,64}$'),       -- the tag key (tag scope only)
  scope_value text CHECK (length(scope_value) BETWEEN 1 AND 256),     -- key id, tag value, model or provider
  window_kind text NOT NULL DEFAULT 'month' CHECK (window_kind IN ('day', 'week', 'month', 'quarter')),
  -- An IANA zone, validated (and spelled canonically) by the daemon with the tz data it computes
  -- windows with; windows reach SQL as instants, so PostgreSQL's own tz data is never consulted.
  timezone    text NOT NULL DEFAULT 'UTC' CHECK (timezone ~ '^[A-Za-z][A-Za-z0-9_+/-]{0,63}$'),
  amount      numeric(20,8) NOT NULL CHECK (amount > 0),
  levels      smallint[] NOT NULL DEFAULT '{50,80,100}'
              CHECK (cardinality(levels) BETWEEN 1 AND 10 AND 1 <= ALL (levels) AND 1000 >= ALL (levels)),
  action      text NOT NULL DEFAULT 'alert' CHECK (action IN ('alert', 'block', 'shadow')),
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now(),
  CHECK ((scope_kind = 'account') = (scope_value IS NULL)),
  CHECK ((scope_kind = 'tag') = (scope_key IS NOT NULL))
);
CREATE INDEX scoped_budgets_account ON scoped_budgets (account_id);

-- Each level of each budget fires once per window, fleet-wide: the primary key decides, as
-- alert_levels_fired does for the account budget. window_start is the window's first instant.
CREATE TABLE budget_levels_fired (
  budget_id    text NOT NULL REFERENCES scoped_budgets (id) ON DELETE CASCADE,
  window_start timestamptz NOT NULL,
  level        smallint NOT NULL CHECK (level BETWEEN 1 AND 1000),
  event_id     uuid NOT NULL UNIQUE,
  spend        numeric(20,8) NOT NULL,
  amount       numeric(20,8) NOT NULL,
  fired_at     timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (budget_id, window_start, level)
);

-- Every budget of the fleet, the account budget included, in one shape.
CREATE VIEW budget_definitions AS
  SELECT 'acct_' || left(replace(b.account_id::text, '-', ''), 12) AS id, b.account_id,
    'account'::text AS scope_kind, NULL::text AS scope_key, NULL::text AS scope_value,
    'month'::text AS window_kind, 'UTC'::text AS timezone, b.monthly_usd AS amount,
    '{50,80,100}'::smallint[] AS levels, CASE WHEN b.hard_cap THEN 'block' ELSE 'alert' END AS action,
    true AS account_budget, b.created_at, b.updated_at
  FROM budgets b
  UNION ALL
  SELECT s.id, s.account_id, s.scope_kind, s.scope_key, s.scope_value, s.window_kind, s.timezone, s.amount,
    s.levels, s.action, false, s.created_at, s.updated_at
  FROM scoped_budgets s;

-- A call a shadow budget would have refused: the ids of those budgets (NULL for every other call).
ALTER TABLE usage_events ADD COLUMN would_block jsonb;
CREATE INDEX usage_events_would_block ON usage_events (account_id, time) WHERE would_block IS NOT NULL;

-- What sidecars must see within 5 s: the budgets of every scope.
CREATE TRIGGER meter_changes_scoped_budgets AFTER INSERT OR UPDATE OR DELETE ON scoped_budgets
  FOR EACH STATEMENT EXECUTE FUNCTION meter_bump_changes();
