import { randomUUID } from 'node:crypto';
import type { BudgetAlert, BudgetRef } from '../alerts/alert.js';
import type { Queryable } from '../store/types.js';
import { normaliseUsd, toUnits, utilizationPct } from '../money.js';
import type { MonthWindow } from '../calendar.js';
import { topModels, topTags } from './queries.js';

export interface AlertFacts {
  type: BudgetAlert['type'];
  accountId: string;
  account: string;
  window: MonthWindow;
  level: number | null;
  /** Decimal text (NUMERIC). */
  spend: string;
  budget: string | null;
  createdAt: Date;
  /** The budget the alert is about (every budget.threshold alert names it). */
  budgetRef?: BudgetRef;
}

/** The alert a channel receives: the figures plus the month's top models and tags. */
export async function composeAlert(db: Queryable, f: AlertFacts): Promise<BudgetAlert> {
  const [models, tags] = [await topModels(db, f.accountId, f.window), await topTags(db, f.accountId, f.window)];
  return {
    id: randomUUID(),
    type: f.type,
    account: f.account,
    month: f.window.month,
    level: f.level,
    spend: normaliseUsd(f.spend),
    budget: f.budget === null ? null : normaliseUsd(f.budget),
    utilization_pct: f.budget === null ? null : utilizationPct(toUnits(f.spend), toUnits(f.budget)),
    top_models: models.map((m) => ({ ...m, spend: normaliseUsd(m.spend) })),
    top_tags: tags.map((t) => ({ ...t, spend: normaliseUsd(t.spend) })),
    created_at: f.createdAt.toISOString(),
    ...(f.budgetRef && { budget_ref: f.budgetRef }),
  };
}
