/**
 * The budgets in force, in memory: which ones a call is subject to, with their current window,
 * answered with no I/O (the admission path and the fleet's leases ask it), and the statement
 * that gives a budget's exact window spend (the lease statement runs it). The monitor
 * (monitor.ts) replaces the definitions whenever meter_changes.version moves.
 */
import type { WindowKind } from '../calendar.js';
import type { BudgetDef } from './definitions.js';
import { scopeMatches, type BudgetAction, type BudgetCall, type Scope } from './scope.js';
import { spendQuery, type SpendStatement, type SpendWindow } from './spend.js';
import { currentWindow } from './status.js';

export interface MatchedBudget {
  id: string;
  accountId: string;
  scope: Scope;
  /** In force: `block` only where the account's plan has the hard cap (else `alert`). */
  action: BudgetAction;
  /** Units of 1e-8 USD (src/money.ts). */
  amountUnits: bigint;
  window: WindowKind;
  /** The window that contains `now`: first instant (ms, inclusive), next window's first (exclusive). */
  windowStart: number;
  windowEnd: number;
  timezone: string;
  levels: number[];
  /** A block (or shadow) budget that admits a call only when its own worst case fits too. */
  strict: boolean;
  /** The account's monthly budget (`meter budget set`; isAccountBudget in definitions.ts). */
  accountBudget: boolean;
}

interface Entry {
  def: BudgetDef;
  /** The last window computed (a zone's window costs an Intl call or two): reused while `now` is in it. */
  window: SpendWindow;
}

export class BudgetBook {
  #byAccount = new Map<string, Entry[]>();
  #byId = new Map<string, Entry>();
  /** Accounts with any budget whose action (in force) is block or shadow. */
  #admitted = new Set<string>();

  constructor(defs: BudgetDef[] = []) {
    this.replace(defs);
  }

  /** Installs a new set of definitions (one synchronous step). */
  replace(defs: BudgetDef[]): void {
    const byAccount = new Map<string, Entry[]>();
    const byId = new Map<string, Entry>();
    const admitted = new Set<string>();
    for (const def of defs) {
      const old = this.#byId.get(def.id);
      const same = old && old.def.window === def.window && old.def.timezone === def.timezone;
      const entry: Entry = { def, window: same ? old.window : { start: 0, end: 0 } };
      byId.set(def.id, entry);
      let list = byAccount.get(def.accountId);
      if (!list) byAccount.set(def.accountId, (list = []));
      list.push(entry);
      if ((def.action === 'block' && def.enforced) || def.action === 'shadow') admitted.add(def.accountId);
    }
    this.#byAccount = byAccount;
    this.#byId = byId;
    this.#admitted = admitted;
  }

  /** Every budget that applies to the call at `now` (the account budget included). */
  matching(call: BudgetCall, now: number): MatchedBudget[] {
    const list = this.#byAccount.get(call.accountId);
    if (!list) return [];
    const out: MatchedBudget[] = [];
    for (const entry of list) if (scopeMatches(entry.def.scope, call)) out.push(this.#matched(entry, now));
    return out;
  }

  /** The statement whose one row `{ spend }` is the budget's exact spend over `window`
   *  (NUMERIC as text; src/budget/spend.ts). */
  spendQuery(budget: Pick<MatchedBudget, 'accountId' | 'scope'>, window: SpendWindow): SpendStatement {
    return spendQuery(budget.accountId, budget.scope, window);
  }

  /** true when a call of the account needs admission by its budgets: a block (in force) or
   *  shadow budget, the account budget's hard cap included. */
  admits(accountId: string): boolean {
    return this.#admitted.has(accountId);
  }

  get(id: string): BudgetDef | undefined {
    return this.#byId.get(id)?.def;
  }

  /** Every definition (monitor sweeps, /metrics). */
  all(): BudgetDef[] {
    return [...this.#byId.values()].map((e) => e.def);
  }

  of(accountId: string): BudgetDef[] {
    return (this.#byAccount.get(accountId) ?? []).map((e) => e.def);
  }

  /** The window of a budget at `now` (cached per budget). */
  windowOf(id: string, now: number): SpendWindow | undefined {
    const entry = this.#byId.get(id);
    return entry && this.#window(entry, now);
  }

  #window(entry: Entry, now: number): SpendWindow {
    if (now < entry.window.start || now >= entry.window.end) entry.window = currentWindow(entry.def, now);
    return entry.window;
  }

  #matched(entry: Entry, now: number): MatchedBudget {
    const d = entry.def;
    const w = this.#window(entry, now);
    return {
      id: d.id,
      accountId: d.accountId,
      scope: d.scope,
      action: d.action === 'block' && !d.enforced ? 'alert' : d.action,
      amountUnits: d.amountUnits,
      window: d.window,
      windowStart: w.start,
      windowEnd: w.end,
      timezone: d.timezone,
      levels: d.levels,
      strict: d.strict,
      accountBudget: d.accountBudget,
    };
  }
}
