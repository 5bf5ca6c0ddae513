/** CONTRACT §7's JSON: money and counts as JSON numbers written from exact decimal text. */
import { raw, rawOrNull, type JsonValue } from '../money.js';
import { amountToUnits, formatUnits, percentOf, Usd } from './amount.js';
import type { ResultRow } from './store.js';
import type { Figures, Reconciliation } from './types.js';

const num = (n: bigint | null) => (n === null ? null : raw(n.toString()));
const usd = (n: bigint | null) => (n === null ? null : raw(formatUnits(n)));

/** Finding extras (bigints inside) as JSON. */
function jsonOf(value: unknown): JsonValue {
  if (typeof value === 'bigint') return raw(value.toString());
  if (value instanceof Usd) return raw(formatUnits(value.units));
  if (Array.isArray(value)) return value.map(jsonOf);
  if (value !== null && typeof value === 'object')
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, jsonOf(v)]));
  return value as JsonValue;
}

const figures = (f: Figures): JsonValue => ({
  requests: num(f.requests),
  input_tokens: num(f.input_tokens),
  cached_input_tokens: num(f.cached_input_tokens),
  output_tokens: num(f.output_tokens),
  cost: usd(f.cost),
});

export function reconciliationJson(r: Reconciliation): JsonValue {
  return {
    provider: r.provider,
    account: r.account,
    from: r.from,
    to: r.to,
    tolerance: { usd: raw(formatUnits(r.tolerance.usd)), pct: r.tolerance.pct },
    days: r.days.map((d) => ({
      date: d.date,
      model: d.model,
      provider: figures(d.provider),
      meter: figures(d.meter),
      diff_usd: usd(d.diff_usd),
      diff_pct: rawOrNull(d.diff_pct),
    })),
    totals: {
      provider_cost: usd(r.totals.provider_cost),
      meter_cost: usd(r.totals.meter_cost),
      diff_usd: usd(r.totals.diff_usd),
      diff_pct: rawOrNull(r.totals.diff_pct),
    },
    findings: r.findings.map(jsonOf),
    unattributed: r.unattributed.map((u) => ({ date: u.date, description: u.description, cost: usd(u.cost) })),
    meter_left_out: r.meter_left_out.map((u) => ({
      date: u.date,
      model: u.model,
      description: u.description,
      cost: usd(u.cost),
    })),
  };
}

const units = (text: string) => amountToUnits(text) ?? 0n;
const maybe = (text: string | null) => (text === null ? null : raw(text));

/** /analytics/reconciliation: the stored daily results of one provider, scope and month. */
export function storedJson(
  provider: string,
  month: string,
  scope: 'account' | 'organisation',
  rows: ResultRow[],
): JsonValue {
  let providerCost: bigint | null = 0n;
  let meterCost = 0n;
  const days = rows.map((r) => {
    const p = r.provider_cost === null ? null : units(r.provider_cost);
    const m = units(r.meter_cost);
    providerCost = p === null || providerCost === null ? null : providerCost + p;
    meterCost += m;
    return {
      date: r.date,
      model: r.model,
      provider: {
        requests: maybe(r.provider_requests),
        input_tokens: raw(r.provider_input_tokens),
        cached_input_tokens: raw(r.provider_cached_input_tokens),
        output_tokens: raw(r.provider_output_tokens),
        cost: p === null ? null : raw(formatUnits(p)),
      },
      meter: {
        requests: raw(r.meter_requests),
        input_tokens: raw(r.meter_input_tokens),
        cached_input_tokens: raw(r.meter_cached_input_tokens),
        output_tokens: raw(r.meter_output_tokens),
        cost: raw(formatUnits(m)),
      },
      diff_usd: p === null ? null : raw(formatUnits(m - p)),
      diff_pct: p === null ? null : rawOrNull(percentOf(m - p, p)),
    };
  });
  const pc = providerCost as bigint | null;
  const diff = pc === null ? null : meterCost - pc;
  return {
    provider,
    month,
    scope,
    days,
    totals: {
      provider_cost: pc === null ? null : raw(formatUnits(pc)),
      meter_cost: raw(formatUnits(meterCost)),
      diff_usd: diff === null ? null : raw(formatUnits(diff)),
      diff_pct: diff === null ? null : rawOrNull(percentOf(diff, pc!)),
    },
    findings: rows.flatMap((r) => r.findings as JsonValue[]),
  };
}
