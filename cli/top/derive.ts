/**
 * The figures `meter top` shows, derived from what the data module holds: pure functions of
 * their inputs (no clock, no store), so they are tested against known event sets.
 *
 * Money is bigint units of 1e-8 USD (NUMERIC(20,8) exactly, src/money.ts); every sum,
 * rate and projection is computed on those and rounded once, half-even.
 */
import { topBudget, type BudgetView, type TopBudget } from '../../src/top/budgets.js';
import { windowBounds } from '../../src/calendar.js';
import { divRoundHalfEven, formatUnits, toUnits, utilizationPct } from '../../src/money.js';

/** One usage event as top keeps it (from top.events_since / top.events_before). */
export interface TopEvent {
  id: string;
  /** When the row was written (database clock), µs since the epoch. */
  recordedUs: number;
  /** When the call arrived, ms since the epoch. */
  timeMs: number;
  provider: string;
  model: string;
  status: number;
  inputTokens: string;
  outputTokens: string;
  /** Units of 1e-8 USD. */
  cost: bigint;
  usageSource: string;
  unpriced: boolean;
  latencyMs: number;
  tags: Record<string, string>;
}

/** Spend and calls recorded per minute (key: minutes since the epoch). */
export type MinuteBuckets = Map<number, { spend: bigint; calls: number }>;

export const MS_PER_MINUTE = 60_000;
const MS_PER_HOUR = 3_600_000;
export const SPARK_MINUTES = 60;

export function addToBuckets(buckets: MinuteBuckets, minute: number, spend: bigint, calls: number): void {
  const b = buckets.get(minute);
  if (b) {
    b.spend += spend;
    b.calls += calls;
  } else buckets.set(minute, { spend, calls });
}

export function bucketsFrom(events: readonly TopEvent[]): MinuteBuckets {
  const buckets: MinuteBuckets = new Map();
  for (const e of events) addToBuckets(buckets, Math.floor(e.recordedUs / 1000 / MS_PER_MINUTE), e.cost, 1);
  return buckets;
}

/**
 * Burn rate in units per hour over the last `minutes` minutes: the spend recorded from the start
 * of the minute `minutes - 1` before the current one up to now, divided by the time since that
 * start (between minutes-1 and minutes long), scaled to an hour.
 */
export function burnPerHour(buckets: MinuteBuckets, nowMs: number, minutes: number): bigint {
  const current = Math.floor(nowMs / MS_PER_MINUTE);
  const first = current - (minutes - 1);
  let spend = 0n;
  for (let m = first; m <= current; m++) spend += buckets.get(m)?.spend ?? 0n;
  const elapsed = BigInt(Math.max(1, Math.round(nowMs - first * MS_PER_MINUTE)));
  return divRoundHalfEven(spend * BigInt(MS_PER_HOUR), elapsed);
}

/** Month-end spend: what is spent so far plus the hourly burn rate for every hour left in the
 *  UTC month (the 60-minute rate: steadier than the 5-minute one). */
export function projectMonthEnd(monthSpend: bigint, perHour: bigint, nowMs: number): bigint {
  const left = BigInt(Math.max(0, windowBounds('month', nowMs).end - Math.round(nowMs)));
  return monthSpend + divRoundHalfEven(perHour * left, BigInt(MS_PER_HOUR));
}

/** Spend per minute over the last `minutes` minutes, oldest first, the current minute last. */
export function spendPerMinute(buckets: MinuteBuckets, nowMs: number, minutes = SPARK_MINUTES): bigint[] {
  const current = Math.floor(nowMs / MS_PER_MINUTE);
  return Array.from({ length: minutes }, (_, i) => buckets.get(current - minutes + 1 + i)?.spend ?? 0n);
}

export interface WindowStats {
  seconds: number;
  calls: number;
  calls_per_s: number;
  /** Share of calls answered with an error status (≥ 400), percent; null without calls. */
  error_rate_pct: number | null;
  p50_ms: number | null;
  p95_ms: number | null;
  estimated_pct: number | null;
  unpriced_pct: number | null;
}

/** Nearest-rank percentile of sorted values. */
export function percentile(sorted: readonly number[], p: number): number | null {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

const pct = (part: number, whole: number) => (whole === 0 ? null : Math.round((part / whole) * 1000) / 10);

/** Calls recorded in the last `seconds` seconds (recordedUs > now - seconds). */
export function windowStats(events: readonly TopEvent[], nowMs: number, seconds: number): WindowStats {
  const since = (nowMs - seconds * 1000) * 1000;
  const inWindow = events.filter((e) => e.recordedUs > since);
  const n = inWindow.length;
  const latencies = inWindow.map((e) => e.latencyMs).sort((a, b) => a - b);
  const round = (v: number | null) => (v === null ? null : Math.round(v));
  return {
    seconds,
    calls: n,
    calls_per_s: Math.round((n / seconds) * 100) / 100,
    error_rate_pct: pct(inWindow.filter((e) => e.status >= 400).length, n),
    p50_ms: round(percentile(latencies, 50)),
    p95_ms: round(percentile(latencies, 95)),
    estimated_pct: pct(inWindow.filter((e) => e.usageSource === 'estimated').length, n),
    unpriced_pct: pct(inWindow.filter((e) => e.unpriced).length, n),
  };
}

export type HardCapState = 'off' | 'on' | 'reached';

/** off: no hard cap; on: calls are admitted; reached: calls are refused with 402. */
export function hardCapState(hardCap: boolean, spend: bigint, budget: bigint | null): HardCapState {
  if (!hardCap || budget === null) return 'off';
  return spend >= budget ? 'reached' : 'on';
}

/** Rows of the store, as top.month / top.by_model / top.by_tag return them. */
export interface MonthRow {
  spend: string;
  requests: string;
  budget: string | null;
  hard_cap: boolean;
  levels_fired: number[];
}
export interface ModelRow {
  provider: string;
  model: string;
  spend: string;
  requests: string;
}
export interface TagRow {
  value: string | null;
  spend: string;
  requests: string;
}

/** Everything the figures are derived from. */
export interface Snapshot {
  account: string;
  plan: string;
  accounts: string[];
  nowMs: number;
  intervalS: number;
  windowS: number;
  month: MonthRow;
  byModel: ModelRow[];
  tagKey: string | null;
  tagKeys: string[];
  byTag: TagRow[];
  buckets: MinuteBuckets;
  /** Recent events, oldest recorded first. */
  events: readonly TopEvent[];
  tailSize: number;
  /** The month's stored reconciliation per provider (src/top/statements.ts `top.reconciliation`). */
  reconciliation?: ReconciliationRow[];
  /** Every budget of the account in its current window (src/budget/status.ts). */
  budgets?: BudgetView[];
}

export interface ReconciliationRow {
  provider: string;
  provider_cost: string | null;
  meter_cost: string | null;
  unknown: number;
}

export interface TailRow {
  id: string;
  time: string;
  provider: string;
  model: string;
  input_tokens: string;
  output_tokens: string;
  cost: string;
  latency_ms: number;
  status: number;
  usage_source: string;
  unpriced: boolean;
  tags: Record<string, string>;
}

/** The figures: what `--once --json` prints and what the frame draws. Money is decimal text. */
export interface Figures {
  account: string;
  plan: string;
  accounts: string[];
  at: string;
  interval_s: number;
  month: {
    month: string;
    spend: string;
    requests: string;
    budget: string | null;
    utilization_pct: string | null;
    hard_cap: HardCapState;
    levels_fired: number[];
  };
  burn: { per_hour_5m: string; per_hour_60m: string; projected_month_end: string };
  window: WindowStats;
  by_model: ModelRow[];
  by_tag: { key: string | null; keys: string[]; groups: TagRow[] };
  spend_per_minute: string[];
  tail: TailRow[];
  /** Every budget of the account, in its own window and zone. */
  budgets: TopBudget[];
  /** The month's drift from the providers' own reports (empty until a reconciliation ran). */
  reconciliation: {
    provider: string;
    provider_cost: string;
    meter_cost: string;
    diff_usd: string;
    diff_pct: string | null;
  }[];
}

const norm = (decimal: string) => formatUnits(toUnits(decimal));

/** Meter minus the provider, and in percent of the provider (2 decimals, toward zero). */
function driftOf(provider: string, providerCost: string, meterCost: string) {
  const p = toUnits(providerCost);
  const diff = toUnits(meterCost) - p;
  const pct = p === 0n ? null : Number((diff * 10_000n) / p) / 100;
  return {
    provider,
    provider_cost: formatUnits(p),
    meter_cost: norm(meterCost),
    diff_usd: formatUnits(diff),
    diff_pct: pct === null ? null : pct.toFixed(2),
  };
}

export function deriveFigures(s: Snapshot): Figures {
  const spend = toUnits(s.month.spend);
  const budget = s.month.budget === null ? null : toUnits(s.month.budget);
  const burn5 = burnPerHour(s.buckets, s.nowMs, 5);
  const burn60 = burnPerHour(s.buckets, s.nowMs, 60);
  const tail = s.events.slice(-s.tailSize).reverse();
  return {
    account: s.account,
    plan: s.plan,
    accounts: s.accounts,
    at: new Date(s.nowMs).toISOString(),
    interval_s: s.intervalS,
    month: {
      month: new Date(s.nowMs).toISOString().slice(0, 7),
      spend: formatUnits(spend),
      requests: s.month.requests,
      budget: budget === null ? null : formatUnits(budget),
      utilization_pct: budget === null ? null : utilizationPct(spend, budget),
      hard_cap: hardCapState(s.month.hard_cap, spend, budget),
      levels_fired: s.month.levels_fired,
    },
    burn: {
      per_hour_5m: formatUnits(burn5),
      per_hour_60m: formatUnits(burn60),
      projected_month_end: formatUnits(projectMonthEnd(spend, burn60, s.nowMs)),
    },
    window: windowStats(s.events, s.nowMs, s.windowS),
    by_model: s.byModel.map((r) => ({ ...r, spend: norm(r.spend) })),
    by_tag: { key: s.tagKey, keys: s.tagKeys, groups: s.byTag.map((r) => ({ ...r, spend: norm(r.spend) })) },
    spend_per_minute: spendPerMinute(s.buckets, s.nowMs).map(formatUnits),
    budgets: (s.budgets ?? []).map(topBudget),
    reconciliation: (s.reconciliation ?? [])
      .filter((r) => r.unknown === 0 && r.provider_cost !== null && r.meter_cost !== null)
      .map((r) => driftOf(r.provider, r.provider_cost!, r.meter_cost!)),
    tail: tail.map((e) => ({
      id: e.id,
      time: new Date(e.timeMs).toISOString(),
      provider: e.provider,
      model: e.model,
      input_tokens: e.inputTokens,
      output_tokens: e.outputTokens,
      cost: formatUnits(e.cost),
      latency_ms: Math.round(e.latencyMs),
      status: e.status,
      usage_source: e.usageSource,
      unpriced: e.unpriced,
      tags: e.tags,
    })),
  };
}
