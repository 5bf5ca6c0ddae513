/**
 * A budget's state in its current window: exact spend, the levels fired, and what its action
 * does at that spend. /analytics/budgets, `meter budgets list|show --json` and `meter top` show
 * the same object (CONTRACT §4).
 */
import { isoInZone, windowBounds } from '../calendar.js';
import { formatUnits, money, raw, reached, toUnits, utilizationPct, type JsonValue } from '../money.js';
import type { Queryable } from '../store/types.js';
import type { BudgetDef } from './definitions.js';
import { spendQuery, type SpendWindow } from './spend.js';

export type BudgetState = 'ok' | 'alerting' | 'blocked' | 'would_block';

export interface BudgetStatus {
  def: BudgetDef;
  window: SpendWindow;
  spend: string;
  spendUnits: bigint;
  levelsFired: number[];
  /** Calls in this window a shadow budget would have refused (0 for other actions). */
  shadowRefusals: number;
  state: BudgetState;
}

/** The window of `def` that contains `now`. */
export const currentWindow = (def: Pick<BudgetDef, 'window' | 'timezone'>, now: number): SpendWindow =>
  windowBounds(def.window, now, 0, def.timezone);

export function stateOf(def: BudgetDef, spendUnits: bigint): BudgetState {
  const full = spendUnits >= def.amountUnits;
  if (full && def.action === 'block' && def.enforced) return 'blocked';
  if (full && def.action === 'shadow') return 'would_block';
  return def.levels.some((l) => reached(spendUnits, def.amountUnits, l)) ? 'alerting' : 'ok';
}

/** Levels of a budget fired in the window. */
export async function firedLevels(db: Queryable, def: Pick<BudgetDef, 'id'>, w: SpendWindow): Promise<number[]> {
  const rows = await db.query<{ level: number }>(
    `SELECT level::int AS level FROM budget_levels_fired WHERE budget_id = $1 AND window_start = $2::timestamptz ORDER BY level`,
    [def.id, new Date(w.start).toISOString()],
  );
  return rows.map((r) => Number(r.level));
}

export async function readSpend(
  db: Queryable,
  def: Pick<BudgetDef, 'accountId' | 'scope'>,
  w: SpendWindow,
): Promise<string> {
  const { sql, params } = spendQuery(def.accountId, def.scope, w);
  const [row] = await db.query<{ spend: string }>(sql, params);
  return formatUnits(toUnits(row?.spend ?? '0'));
}

export async function budgetStatus(db: Queryable, def: BudgetDef, now: number): Promise<BudgetStatus> {
  const window = currentWindow(def, now);
  const spend = await readSpend(db, def, window);
  const spendUnits = toUnits(spend);
  let shadowRefusals = 0;
  if (def.action === 'shadow') {
    const [row] = await db.query<{ n: string }>(
      `SELECT count(*)::text AS n FROM usage_events WHERE account_id = $1::uuid AND would_block IS NOT NULL
          AND time >= $2::timestamptz AND time < $3::timestamptz AND would_block ? $4`,
      [def.accountId, new Date(window.start).toISOString(), new Date(window.end).toISOString(), def.id],
    );
    shadowRefusals = Number(row?.n ?? 0);
  }
  return {
    def,
    window,
    spend,
    spendUnits,
    levelsFired: await firedLevels(db, def, window),
    shadowRefusals,
    state: stateOf(def, spendUnits),
  };
}

export async function budgetStatuses(db: Queryable, defs: BudgetDef[], now: number): Promise<BudgetStatus[]> {
  const out: BudgetStatus[] = [];
  for (const def of defs) out.push(await budgetStatus(db, def, now));
  return out;
}

/** A budget as CONTRACT §4 shows it, money as decimal text (what the admin API carries);
 *  `account` and `shadow_refusals` added. budgetViewJson writes money as exact numbers. */
export interface BudgetView {
  id: string;
  account: string;
  scope: { kind: string; key: string | null; value: string | null };
  window: string;
  timezone: string;
  window_start: string;
  window_end: string;
  amount: string;
  spend: string;
  utilization_pct: string;
  levels: number[];
  levels_fired: number[];
  action: string;
  strict: boolean;
  state: BudgetState;
  shadow_refusals: number;
}

export function budgetView(s: BudgetStatus): BudgetView {
  const d = s.def;
  return {
    id: d.id,
    account: d.account,
    scope: { kind: d.scope.kind, key: d.scope.key, value: d.scope.value },
    window: d.window,
    timezone: d.timezone,
    window_start: isoInZone(s.window.start, d.timezone),
    window_end: isoInZone(s.window.end, d.timezone),
    amount: d.amount,
    spend: s.spend,
    utilization_pct: utilizationPct(s.spendUnits, d.amountUnits),
    levels: d.levels,
    levels_fired: s.levelsFired,
    action: d.action,
    strict: d.strict,
    state: s.state,
    shadow_refusals: s.shadowRefusals,
  };
}

/** One element of `{"budgets":[…]}`, money as exact JSON numbers. */
export function budgetViewJson(v: BudgetView): JsonValue {
  return { ...v, amount: raw(v.amount), spend: money(v.spend), utilization_pct: raw(v.utilization_pct) };
}
