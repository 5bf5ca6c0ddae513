/** `meter top`'s view of the account's budgets (`meter budgets list`), as the frame draws them. */
import { scopeText, type ScopeKind } from '../budget/scope.js';
import type { BudgetView } from '../budget/status.js';
import { isAccountBudget } from '../budget/definitions.js';
import { formatUnits, toUnits } from '../money.js';

export type { BudgetView } from '../budget/status.js';

export interface TopBudget {
  id: string;
  /** The account's monthly budget (drawn as the Budget line, not among the bars). */
  account_budget: boolean;
  /** `tag:team=search`, as the CLI spells it. */
  scope: string;
  window: string;
  timezone: string;
  amount: string;
  spend: string;
  utilization_pct: string;
  action: string;
  state: string;
  levels_fired: number[];
  shadow_refusals: number;
}

export const topBudget = (b: BudgetView): TopBudget => ({
  id: b.id,
  account_budget: isAccountBudget(b),
  scope: scopeText({ kind: b.scope.kind as ScopeKind, key: b.scope.key, value: b.scope.value }),
  window: b.window,
  timezone: b.timezone,
  amount: b.amount,
  spend: formatUnits(toUnits(b.spend)),
  utilization_pct: b.utilization_pct,
  action: b.action,
  state: b.state,
  levels_fired: b.levels_fired,
  shadow_refusals: b.shadow_refusals,
});
