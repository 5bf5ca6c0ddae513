import type { Queryable } from '../store/types.js';

/** A plan's limits, as stored in the plans table (README lists the defaults). */
export interface Plan {
  name: string;
  /** Proxied calls per calendar month (UTC); null: no quota. */
  monthlyCallQuota: number | null;
  maxActiveKeys: number;
  rawRetentionDays: number;
  rollupRetentionMonths: number;
  rateLimitPerMinute: number;
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
  analytics: string[];
  hard_cap: boolean;
}

export async function loadPlans(db: Queryable): Promise<Map<string, Plan>> {
  const rows = await db.query<PlanRow>('SELECT * FROM plans ORDER BY name');
  return new Map(rows.map((r) => [r.name, {
    name: r.name,
    monthlyCallQuota: r.monthly_call_quota,
    maxActiveKeys: r.max_active_keys,
    rawRetentionDays: r.raw_retention_days,
    rollupRetentionMonths: r.rollup_retention_months,
    rateLimitPerMinute: r.rate_limit_per_minute,
    analytics: r.analytics,
    hardCap: r.hard_cap,
  }]));
}

/** The plans, in memory for the hot path, re-read every refresh so an edited plan reaches
 *  every sidecar within one interval. */
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
