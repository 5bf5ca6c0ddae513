import { randomUUID } from 'node:crypto';
import type { BudgetAlert, BudgetRef, TopModel, TopTag } from '../alerts/alert.js';
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
  /** Its top models and tags, read for its scope and window; else the account's month's. */
  top?: { models: TopModel[]; tags: TopTag[] };
}

/** The alert a channel receives: the figures plus the top models and tags. */
export async function composeAlert(db: Queryable, f: AlertFacts): Promise<BudgetAlert> {
  const { models, tags } = f.top ?? {
    models: await topModels(db, f.accountId, f.window),
    tags: await topTags(db, f.accountId, f.window),
  };
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
