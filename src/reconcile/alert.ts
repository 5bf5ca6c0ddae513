/**
 * The `reconciliation.drift` alert: once per provider, scope and month across every sidecar (the
 * primary key of reconcile_alerts_fired decides, as budget_levels_fired does for budgets), when the
 * month's stored difference passes METER_RECONCILE_ALERT_PCT. It goes through the existing
 * outbox to the channels of the account reconciled; an organisation-wide drift goes to the
 * channels of every account that called the provider that month (their calls make meter's side).
 */
import { randomUUID } from 'node:crypto';
import type { BudgetAlert } from '../alerts/alert.js';
import type { Queryable } from '../store/types.js';
import { abs, amountToUnits, formatUnits, percentOf } from './amount.js';
import { DEFAULT_TOLERANCE } from './compare.js';
import type { ReconcileProvider } from './types.js';

export interface MonthDrift {
  provider_cost: bigint;
  meter_cost: bigint;
  diff_usd: bigint;
  diff_pct: string | null;
  /** The settled days summed, [from, to). */
  from: string;
  to: string;
}

/** The month's stored difference over its settled days (before `settledBefore`). */
export async function monthDrift(
  db: Queryable,
  provider: ReconcileProvider,
  scope: string,
  month: string,
  settledBefore: string,
): Promise<MonthDrift | undefined> {
  const [row] = await db.query<{
    provider_cost: string | null;
    meter_cost: string | null;
    unknown: string;
    last: string | null;
  }>(
    `SELECT sum(provider_cost)::text AS provider_cost, sum(meter_cost)::text AS meter_cost,
            count(*) FILTER (WHERE provider_cost IS NULL)::text AS unknown, max(day)::text AS last
       FROM reconcile_results
      WHERE provider = $1 AND scope = $2 AND to_char(day, 'YYYY-MM') = $3 AND day < $4::date`,
    [provider, scope, month, settledBefore],
  );
  if (!row?.last || row.unknown !== '0' || row.provider_cost === null) return undefined;
  const p = amountToUnits(row.provider_cost)!;
  const m = amountToUnits(row.meter_cost ?? '0')!;
  const last = new Date(Date.parse(`${row.last}T00:00:00Z`) + 86_400_000).toISOString().slice(0, 10);
  return {
    provider_cost: p,
    meter_cost: m,
    diff_usd: m - p,
    diff_pct: percentOf(m - p, p),
    from: `${month}-01`,
    to: last,
  };
}

/** Whether a drift passes the threshold (percent of the provider's figure) and is more than a
 *  cent (the reports' rounding: agreement within it is never a difference). */
export function passes(d: MonthDrift, thresholdPct: number): boolean {
  if (abs(d.diff_usd) <= DEFAULT_TOLERANCE.usd) return false;
  if (d.provider_cost === 0n) return true;
  return abs(d.diff_usd) * 10_000n > abs(d.provider_cost) * BigInt(Math.round(thresholdPct * 100));
}

/** Fires the month's drift alert if no sidecar has: returns how many deliveries were queued. */
export async function fireDrift(
  db: Queryable,
  f: { provider: ReconcileProvider; scope: string; month: string; drift: MonthDrift; thresholdPct: number; now: Date },
): Promise<{ fired: boolean; queued: number }> {
  const alert: BudgetAlert = {
    id: randomUUID(),
    type: 'reconciliation.drift',
    account: '',
    month: f.month,
    level: null,
    spend: formatUnits(f.drift.meter_cost),
    budget: null,
    utilization_pct: null,
    top_models: [],
    top_tags: [],
    created_at: f.now.toISOString(),
    reconciliation: {
      provider: f.provider,
      scope: f.scope === '' ? 'organisation' : 'account',
      from: f.drift.from,
      to: f.drift.to,
      provider_cost: formatUnits(f.drift.provider_cost),
      meter_cost: formatUnits(f.drift.meter_cost),
      diff_usd: formatUnits(f.drift.diff_usd),
      diff_pct: f.drift.diff_pct ?? '100.00',
      threshold_pct: String(f.thresholdPct),
    },
  };
  // One payload per account (its own name in `account`); the same event id on every channel.
  const [row] = await db.query<{ fired: number; queued: number }>(
    `WITH fired AS (
       INSERT INTO reconcile_alerts_fired (provider, scope, month, event_id, diff_pct)
       VALUES ($1, $2, $3, $4::uuid, $5::numeric)
       ON CONFLICT DO NOTHING
       RETURNING event_id
     ), accounts_reached AS (
       SELECT a.id, a.name FROM accounts a
        WHERE ($2 <> '' AND a.id::text = $2)
           OR ($2 = '' AND EXISTS (SELECT 1 FROM usage_daily d WHERE d.account_id = a.id AND d.provider = $1
                                   AND d.day >= $7::date AND d.day < $8::date))
     ), queued AS (
       INSERT INTO alert_deliveries (event_id, channel_id, account_id, payload)
       SELECT f.event_id, c.id, c.account_id, jsonb_set($6::jsonb, '{account}', to_jsonb(r.name))
         FROM fired f CROSS JOIN accounts_reached r JOIN alert_channels c ON c.account_id = r.id
       RETURNING 1
     )
     SELECT (SELECT count(*) FROM fired)::int AS fired, (SELECT count(*) FROM queued)::int AS queued`,
    [
      f.provider,
      f.scope,
      f.month,
      alert.id,
      alert.reconciliation!.diff_pct,
      JSON.stringify(alert),
      f.drift.from,
      f.drift.to,
    ],
  );
  return { fired: (row?.fired ?? 0) > 0, queued: row?.queued ?? 0 };
}
