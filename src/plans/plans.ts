import type { Queryable } from '../store/types.js';
import { MeterError } from '../errors.js';

/** A plan's limits, as stored in the plans table (README lists the defaults). */
export interface Plan {
  name: string;
  /** Proxied calls per calendar month (UTC); null: no quota. */
  monthlyCallQuota: number | null;
  maxActiveKeys: number;
  rawRetentionDays: number;
  rollupRetentionMonths: number;
  rateLimitPerMinute: number;
  /** Input + output tokens a minute per key, calls and tokens a minute per account; null: none. */
  tokensPerMinute: number | null;
  accountCallsPerMinute: number | null;
  accountTokensPerMinute: number | null;
  /** Analytics endpoints the plan includes: summary, daily, by-tag, events. */
  analytics: string[];
  hardCap: boolean;
}

interface PlanRow {
  name: string;
  monthly_call_quota: number | null;
  max_active_keys: number;
  raw_retention_days: number;
  rollup_retention_months: number;
  rate_limit_per_minute: number;
  tokens_per_minute: number | null;
  account_calls_per_minute: number | null;
  account_tokens_per_minute: number | null;
  analytics: string[];
  hard_cap: boolean;
}

export async function loadPlans(db: Queryable): Promise<Map<string, Plan>> {
  const rows = await db.query<PlanRow>('SELECT * FROM plans ORDER BY name');
  return new Map(
    rows.map((r) => [
      r.name,
      {
        name: r.name,
        monthlyCallQuota: r.monthly_call_quota,
        maxActiveKeys: r.max_active_keys,
        rawRetentionDays: r.raw_retention_days,
        rollupRetentionMonths: r.rollup_retention_months,
        rateLimitPerMinute: r.rate_limit_per_minute,
        tokensPerMinute: r.tokens_per_minute,
        accountCallsPerMinute: r.account_calls_per_minute,
        accountTokensPerMinute: r.account_tokens_per_minute,
        analytics: r.analytics,
        hardCap: r.hard_cap,
      },
    ]),
  );
}

/** Analytics endpoints a plan can include. */
export const PLAN_ANALYTICS = ['summary', 'daily', 'by-tag', 'events', 'reconciliation', 'export'] as const;

/** A change to one plan's limits (`meter plans set`); every field is optional. */
export interface PlanEdits {
  monthlyCalls?: number | 'unlimited';
  maxKeys?: number;
  retentionDays?: number;
  rollupMonths?: number;
  rateLimit?: number;
  tokensPerMinute?: number | 'unlimited';
  accountCallsPerMinute?: number | 'unlimited';
  accountTokensPerMinute?: number | 'unlimited';
  analytics?: string[];
  hardCap?: boolean;
}

/** Column of each edit: the statement is built from this fixed list only. */
const EDIT_COLUMNS: Record<keyof PlanEdits, string> = {
  monthlyCalls: 'monthly_call_quota',
  maxKeys: 'max_active_keys',
  retentionDays: 'raw_retention_days',
  rollupMonths: 'rollup_retention_months',
  rateLimit: 'rate_limit_per_minute',
  tokensPerMinute: 'tokens_per_minute',
  accountCallsPerMinute: 'account_calls_per_minute',
  accountTokensPerMinute: 'account_tokens_per_minute',
  analytics: 'analytics',
  hardCap: 'hard_cap',
};

export class UnknownPlanError extends MeterError {
  override name = 'UnknownPlanError';
}

/** Applies edits to a plan; throws UnknownPlanError naming the plans that exist. */
export async function updatePlan(db: Queryable, plan: string, edits: PlanEdits): Promise<{ name: string }> {
  const params: unknown[] = [plan];
  const sets: string[] = [];
  for (const [field, column] of Object.entries(EDIT_COLUMNS) as [keyof PlanEdits, string][]) {
    const value = edits[field];
    if (value === undefined) continue;
    params.push(value === 'unlimited' ? null : value);
    sets.push(`${column} = $${params.length}`);
  }
  if (sets.length === 0) throw new UnknownPlanError('nothing to change');
  const rows = await db.query<{ name: string }>(
    `UPDATE plans SET ${sets.join(', ')}, updated_at = now() WHERE name = $1 RETURNING name`,
    params,
  );
  if (rows.length === 0) {
    throw new UnknownPlanError(
      `unknown plan "${plan}": expected one of ${[...(await loadPlans(db)).keys()].join(', ')}`,
    );
  }
  return rows[0]!;
}

/** The plans, in memory for the hot path, re-read when the fleet's change counter moves, so an
 *  edited plan reaches every sidecar within one interval. */
export class PlanBook {
  #plans = new Map<string, Plan>();

  async refresh(db: Queryable): Promise<void> {
    this.#plans = await loadPlans(db);
  }

  get(name: string): Plan | undefined {
    return this.#plans.get(name);
  }

  all(): Plan[] {
    return [...this.#plans.values()];
  }
}
