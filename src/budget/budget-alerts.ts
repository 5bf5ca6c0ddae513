/**
 * Alerts of every budget, the account budget included: each level fires once per budget and
 * window across every sidecar, the primary key of budget_levels_fired deciding, and the
 * deliveries are queued by the same statement, so a sidecar that loses the race queues nothing.
 */
import type { BudgetRef } from '../alerts/alert.js';
import { isoInZone } from '../calendar.js';
import type { Queryable } from '../store/types.js';
import { composeAlert, readTop } from './compose-alert.js';
import type { BudgetDef } from './definitions.js';
import type { SpendWindow } from './spend.js';

export function budgetRef(def: BudgetDef, w: SpendWindow): BudgetRef {
  return {
    budget_id: def.id,
    scope: { kind: def.scope.kind, key: def.scope.key, value: def.scope.value },
    window: def.window,
    timezone: def.timezone,
    window_start: isoInZone(w.start, def.timezone),
    window_end: isoInZone(w.end, def.timezone),
  };
}

const day = (t: number) => new Date(t).toISOString().slice(0, 10);

/**
 * Fires `level` of a budget for window `w` at `spend` (decimal text); false when it was
 * fired already (here or by another sidecar) or the budget changed meanwhile (its amount or
 * levels are no longer those the level was computed from).
 */
export async function fireBudgetLevel(
  db: Queryable,
  def: BudgetDef,
  w: SpendWindow,
  level: number,
  spend: string,
  now: Date,
): Promise<{ fired: boolean; queued: number; eventId: string }> {
  // The payload's top models and tags: those of the budget's scope over its window.
  const top = await readTop(db, def.accountId, def.scope, w);
  const alert = await composeAlert(db, {
    type: 'budget.threshold',
    accountId: def.accountId,
    account: def.account,
    window: {
      month: isoInZone(w.start, def.timezone).slice(0, 7),
      from: day(w.start),
      to: day(w.end - 1 + 86_400_000),
    },
    level,
    spend,
    budget: def.amount,
    createdAt: now,
    budgetRef: budgetRef(def, w),
    top,
  });
  const [row] = await db.query<{ fired: number; queued: number }>(
    `WITH fired AS (
       INSERT INTO budget_levels_fired (budget_id, window_start, level, event_id, spend, amount)
       SELECT $1, $2::timestamptz, $3::smallint, $4::uuid, $5::numeric, $6::numeric
        WHERE EXISTS (SELECT 1 FROM budgets
                       WHERE id = $1 AND amount = $6::numeric AND $3::smallint = ANY (levels))
       ON CONFLICT DO NOTHING
       RETURNING event_id
     ), queued AS (
       INSERT INTO alert_deliveries (event_id, channel_id, account_id, payload)
       SELECT f.event_id, c.id, c.account_id, $8::jsonb FROM fired f JOIN alert_channels c ON c.account_id = $7::uuid
       RETURNING 1
     )
     SELECT (SELECT count(*) FROM fired)::int AS fired, (SELECT count(*) FROM queued)::int AS queued`,
    [def.id, new Date(w.start).toISOString(), level, alert.id, spend, def.amount, def.accountId, JSON.stringify(alert)],
  );
  return { fired: (row?.fired ?? 0) > 0, queued: row?.queued ?? 0, eventId: alert.id };
}
