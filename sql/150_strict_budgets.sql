-- Strict budgets (CONTRACT §6): a strict block budget admits a call only when the call's own
-- worst case fits in what is left too; every other block budget admits calls while any of its
-- amount is left (spend plus the fleet's calls in flight) and then holds the call's worst case.

ALTER TABLE scoped_budgets ADD COLUMN strict boolean NOT NULL DEFAULT false;

CREATE OR REPLACE VIEW budget_definitions AS
  SELECT 'acct_' || left(replace(b.account_id::text, '-', ''), 12) AS id, b.account_id,
    'account'::text AS scope_kind, NULL::text AS scope_key, NULL::text AS scope_value,
    'month'::text AS window_kind, 'UTC'::text AS timezone, b.monthly_usd AS amount,
    '{50,80,100}'::smallint[] AS levels, CASE WHEN b.hard_cap THEN 'block' ELSE 'alert' END AS action,
    true AS account_budget, b.created_at, b.updated_at, false AS strict
  FROM budgets b
  UNION ALL
  SELECT s.id, s.account_id, s.scope_kind, s.scope_key, s.scope_value, s.window_kind, s.timezone, s.amount,
    s.levels, s.action, false, s.created_at, s.updated_at, s.strict
  FROM scoped_budgets s;
