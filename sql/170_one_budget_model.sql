-- One budget model (CONTRACT §6, issue 41): the account budget of `meter budget set` IS the
-- budget with scope account, window month, zone UTC. Its rows move in place from the tables of
-- sql/004 (budgets, alert_levels_fired) into those of sql/130, which then become the only
-- budget tables: `scoped_budgets` is renamed `budgets`.

DROP VIEW budget_definitions;

-- At most one account budget per account (below, a unique index). Where one existed besides
-- `meter budget set`'s (made by `meter budgets create` with its defaults), `budget set`'s stays
-- the account budget and the others keep counting exactly as before with the zone spelled
-- Etc/UTC (the same clock), so nothing a user set up is lost or changes what it does.
UPDATE scoped_budgets s SET timezone = 'Etc/UTC', updated_at = now()
 WHERE s.scope_kind = 'account' AND s.window_kind = 'month' AND s.timezone = 'UTC'
   AND (EXISTS (SELECT 1 FROM budgets b WHERE b.account_id = s.account_id)
        OR EXISTS (SELECT 1 FROM scoped_budgets o
                    WHERE o.account_id = s.account_id AND o.scope_kind = 'account' AND o.window_kind = 'month'
                      AND o.timezone = 'UTC' AND (o.created_at, o.id) < (s.created_at, s.id)));

-- The account budget keeps its id without the 'acct_' prefix (the first 12 hex digits of its
-- account's id); `--hard-cap` is action block, a plain budget action alert; levels 50,80,100.
INSERT INTO scoped_budgets (id, account_id, scope_kind, window_kind, timezone, amount, levels, action, strict,
                            created_at, updated_at)
SELECT left(replace(b.account_id::text, '-', ''), 12), b.account_id, 'account', 'month', 'UTC', b.monthly_usd,
       '{50,80,100}', CASE WHEN b.hard_cap THEN 'block' ELSE 'alert' END, false, b.created_at, b.updated_at
  FROM budgets b;

-- Its fired levels, every month's: a level fired this month does not fire again after the
-- upgrade (window_start is the month's first instant, UTC, as the monitor computes it).
INSERT INTO budget_levels_fired (budget_id, window_start, level, event_id, spend, amount, fired_at)
SELECT left(replace(f.account_id::text, '-', ''), 12), (f.month || '-01')::timestamp AT TIME ZONE 'UTC', f.level,
       f.event_id, f.spend, f.budget, f.fired_at
  FROM alert_levels_fired f JOIN budgets b ON b.account_id = f.account_id;

DROP TABLE alert_levels_fired;
DROP TABLE budgets;

ALTER TABLE scoped_budgets RENAME TO budgets;
ALTER INDEX scoped_budgets_pkey RENAME TO budgets_pkey;
ALTER INDEX scoped_budgets_account RENAME TO budgets_account;
ALTER TRIGGER meter_changes_scoped_budgets ON budgets RENAME TO budgets_changed;

CREATE UNIQUE INDEX budgets_account_month ON budgets (account_id)
  WHERE scope_kind = 'account' AND window_kind = 'month' AND timezone = 'UTC';
