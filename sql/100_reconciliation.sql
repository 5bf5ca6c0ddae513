-- Reconciliation (CONTRACT §7): meter's figures held against the provider's own usage and cost
-- reports. Admin keys are never stored; only the figures and which provider ids map to accounts.

-- A provider project, workspace or API key id tied to a meter account. Without any mapping a
-- provider's organisation is reconciled against all of meter's accounts together.
CREATE TABLE reconcile_mappings (
  provider    text NOT NULL CHECK (provider IN ('openai', 'anthropic')),
  kind        text NOT NULL CHECK (kind IN ('project', 'workspace', 'api_key')),
  external_id text NOT NULL CHECK (length(external_id) BETWEEN 1 AND 256),
  account_id  uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  created_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (provider, kind, external_id)
);

-- One row per run: a run that failed part-way is recorded as failed and leaves no results.
CREATE TABLE reconcile_runs (
  id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  provider    text NOT NULL,
  scope       text NOT NULL,          -- '' the organisation, else the account's id
  from_day    date NOT NULL,
  to_day      date NOT NULL,          -- exclusive
  started_at  timestamptz NOT NULL DEFAULT now(),
  finished_at timestamptz,
  status      text NOT NULL CHECK (status IN ('complete', 'failed')),
  error       text
);
CREATE INDEX reconcile_runs_provider ON reconcile_runs (provider, started_at DESC);

-- The daily results of the last complete run per provider, scope, day and model.
CREATE TABLE reconcile_results (
  provider                     text NOT NULL,
  scope                        text NOT NULL,
  day                          date NOT NULL,
  model                        text NOT NULL,
  run_id                       bigint NOT NULL,
  provider_requests            bigint,         -- NULL: the provider does not report requests
  provider_input_tokens        bigint NOT NULL,
  provider_cached_input_tokens bigint NOT NULL,
  provider_output_tokens       bigint NOT NULL,
  provider_cost                numeric(20,8),  -- NULL: no cost report for this scope
  meter_requests               bigint NOT NULL,
  meter_input_tokens           bigint NOT NULL,
  meter_cached_input_tokens    bigint NOT NULL,
  meter_output_tokens          bigint NOT NULL,
  meter_cost                   numeric(20,8) NOT NULL,
  findings                     jsonb NOT NULL DEFAULT '[]',
  PRIMARY KEY (provider, scope, day, model)
);

-- A month's drift alert fires once per provider, scope and month across every sidecar.
CREATE TABLE reconcile_alerts_fired (
  provider text NOT NULL,
  scope    text NOT NULL,
  month    text NOT NULL CHECK (month ~ '^\d{4}-\d{2}$'),
  event_id uuid NOT NULL UNIQUE,
  diff_pct numeric NOT NULL,
  fired_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (provider, scope, month)
);

-- The reconciliation endpoint is an analytics endpoint plans include (both, by default).
UPDATE plans SET analytics = array_append(analytics, 'reconciliation')
 WHERE NOT ('reconciliation' = ANY (analytics));
