import { randomUUID } from 'node:crypto';
import type { BudgetAlert, BudgetRef, TopModel, TopTag } from '../alerts/alert.js';
import type { Queryable } from '../store/types.js';
import { normaliseUsd, toUnits, utilizationPct } from '../money.js';
import type { MonthWindow } from '../calendar.js';
import type { Scope } from './scope.js';
import { topQueries, type SpendWindow } from './spend.js';

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
  const { models, tags } =
    f.top ??
    (await readTop(
      db,
      f.accountId,
      { kind: 'account', key: null, value: null },
      {
        start: Date.parse(`${f.window.from}T00:00:00Z`),
        end: Date.parse(`${f.window.to}T00:00:00Z`),
      },
    ));
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

/** What a budget's spend over `w` was made of: its five costliest models and tag values. */
export async function readTop(
  db: Queryable,
  accountId: string,
  scope: Scope,
  w: SpendWindow,
): Promise<{ models: TopModel[]; tags: TopTag[] }> {
  const q = topQueries(accountId, scope, w);
  return {
    models: await db.query<TopModel>(q.models.sql, q.models.params),
    tags: await db.query<TopTag>(q.tags.sql, q.tags.params),
  };
}
