/** GET /analytics/budgets (CONTRACT §4): every budget of the key's account in its current window. */
import type { JsonValue } from '../money.js';
import type { Queryable } from '../store/types.js';
import { loadAccountIdDefinitions } from './definitions.js';
import { budgetStatuses, budgetView, budgetViewJson } from './status.js';

export async function accountBudgets(db: Queryable, accountId: string, now: Date): Promise<JsonValue> {
  const statuses = await budgetStatuses(db, await loadAccountIdDefinitions(db, accountId), now.getTime());
  return { budgets: statuses.map((s) => budgetViewJson(budgetView(s))) };
}
