-- The fleet (docs/fleet.md): limits that hold across every sidecar sharing this database.

-- A change counter: every table a sidecar keeps in memory (plans, budgets, limit overrides, keys)
-- bumps it in the same transaction as the change, so a sidecar re-reads them only when this one
-- row moved (one primary-key read a second per sidecar, whatever the number of accounts).
CREATE TABLE IF NOT EXISTS meter_changes (
  id      integer PRIMARY KEY DEFAULT 1 CHECK (id = 1),
  version bigint  NOT NULL DEFAULT 0
);
INSERT INTO meter_changes (id, version) VALUES (1, 0) ON CONFLICT DO NOTHING;

CREATE OR REPLACE FUNCTION meter_bump_changes() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE meter_changes SET version = version + 1 WHERE id = 1;
  RETURN NULL;
END $$;

CREATE TRIGGER plans_changed AFTER INSERT OR UPDATE OR DELETE ON plans
  FOR EACH STATEMENT EXECUTE FUNCTION meter_bump_changes();
CREATE TRIGGER budgets_changed AFTER INSERT OR UPDATE OR DELETE ON budgets
  FOR EACH STATEMENT EXECUTE FUNCTION meter_bump_changes();
CREATE TRIGGER accounts_changed AFTER INSERT OR UPDATE OR DELETE ON accounts
  FOR EACH STATEMENT EXECUTE FUNCTION meter_bump_changes();
-- Service keys too: a sidecar re-reads changed keys (revocations) when the counter moved.
CREATE TRIGGER api_keys_changed AFTER INSERT OR UPDATE OR DELETE ON api_keys
  FOR EACH STATEMENT EXECUTE FUNCTION meter_bump_changes();

-- Per-minute limits beyond the per-key calls a minute every plan has: tokens a minute per key,
-- and calls and tokens a minute per account. NULL: no such limit.
ALTER TABLE plans
  ADD COLUMN tokens_per_minute         integer CHECK (tokens_per_minute > 0),
  ADD COLUMN account_calls_per_minute  integer CHECK (account_calls_per_minute > 0),
  ADD COLUMN account_tokens_per_minute integer CHECK (account_tokens_per_minute > 0);

-- An account's (key_id NULL) or one key's own per-minute limits, in place of the plan's.
-- A NULL column keeps the plan's figure.
CREATE TABLE limit_overrides (
  account_id        uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  key_id            text NOT NULL DEFAULT '' ,  -- '' for the account itself
  calls_per_minute  integer CHECK (calls_per_minute > 0),
  tokens_per_minute integer CHECK (tokens_per_minute > 0),
  updated_at        timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (account_id, key_id)
);
CREATE TRIGGER limit_overrides_changed AFTER INSERT OR UPDATE OR DELETE ON limit_overrides
  FOR EACH STATEMENT EXECUTE FUNCTION meter_bump_changes();

-- Leases: what each sidecar (holder) holds of one limit's window. `granted` is the slice it may
-- admit calls against without asking; `held` the part of it spent on calls in flight, costs not
-- yet written, or per-minute slots still cooling down (as of its last write). A sidecar that
-- cannot get a call's need sets `wants`: holders of unused slices give them back at their next
-- sync. A lease past `expires_at` counts only its `held`, for a grace period, then nothing.
CREATE TABLE fleet_leases (
  limit_key    text        NOT NULL,
  window_start timestamptz NOT NULL,
  holder       uuid        NOT NULL,
  granted      bigint      NOT NULL CHECK (granted >= 0),
  held         bigint      NOT NULL CHECK (held >= 0),
  wants        bigint      NOT NULL DEFAULT 0,
  expires_at   timestamptz NOT NULL,
  PRIMARY KEY (limit_key, window_start, holder)
);
CREATE INDEX fleet_leases_holder ON fleet_leases (holder);
CREATE INDEX fleet_leases_wanted ON fleet_leases (limit_key, window_start) WHERE wants > 0;
