/**
 * Which analytics endpoints a plan includes (plans.analytics, e.g. free: summary, daily).
 * Read from the store and kept for a while: plans change rarely (`meter accounts set-plan`
 * changes the account's plan, which arrives with the Principal, not this table).
 */
import type { Queryable } from '../store/types.js';

export type Endpoint = 'daily' | 'summary' | 'by-tag' | 'events' | 'reconciliation' | 'export';

export interface PlanGate {
  /** The endpoints the plan includes; empty for a plan the store does not know. */
  endpoints(plan: string): Promise<ReadonlySet<string>>;
}

export function createPlanGate(db: Queryable, ttlMs = 30_000, now: () => number = Date.now): PlanGate {
  let cache: { at: number; plans: Map<string, ReadonlySet<string>> } | undefined;
  let loading: Promise<Map<string, ReadonlySet<string>>> | undefined;
  const load = async () => {
    const rows = await db.query<{ name: string; analytics: string[] }>('SELECT name, analytics FROM plans');
    const plans = new Map(rows.map((r) => [r.name, new Set(r.analytics) as ReadonlySet<string>]));
    cache = { at: now(), plans };
    return plans;
  };
  return {
    async endpoints(plan) {
      const age = cache ? now() - cache.at : Infinity;
      let plans = cache?.plans;
      // An unknown plan may be brand new: look again (at most once a second) before refusing it.
      if (!plans || age >= ttlMs || (!plans.has(plan) && age >= 1_000)) {
        loading ??= load().finally(() => (loading = undefined));
        plans = await loading;
      }
      return plans.get(plan) ?? new Set();
    },
  };
}
