/** `meter top --once --json`: the figures, money and counts as JSON numbers written from their
 *  exact decimal text (never through a float), like the analytics API. */
import { raw, rawOrNull, stringifyJson } from '../../src/money.js';
import type { Figures } from './derive.js';

export function figuresJson(f: Figures, indent = 0): string {
  return stringifyJson(
    {
      account: f.account,
      plan: f.plan,
      accounts: f.accounts,
      at: f.at,
      interval_s: f.interval_s,
      month: {
        ...f.month,
        // a boolean, as /analytics/summary has it; whether calls are being refused, beside it
        hard_cap: f.month.hard_cap !== 'off',
        hard_cap_reached: f.month.hard_cap === 'reached',
        spend: raw(f.month.spend),
        requests: raw(f.month.requests),
        budget: rawOrNull(f.month.budget),
        utilization_pct: rawOrNull(f.month.utilization_pct),
      },
      burn: {
        per_hour_5m: raw(f.burn.per_hour_5m),
        per_hour_60m: raw(f.burn.per_hour_60m),
        projected_month_end: raw(f.burn.projected_month_end),
        projection: 'month spend + 60-minute burn rate x hours left in the UTC month',
      },
      window: { ...f.window },
      by_model: f.by_model.map((m) => ({
        provider: m.provider,
        model: m.model,
        spend: raw(m.spend),
        requests: raw(m.requests),
      })),
      by_tag: {
        key: f.by_tag.key,
        keys: f.by_tag.keys,
        groups: f.by_tag.groups.map((g) => ({ value: g.value, spend: raw(g.spend), requests: raw(g.requests) })),
      },
      spend_per_minute: f.spend_per_minute.map(raw),
      tail: f.tail.map((t) => ({
        ...t,
        input_tokens: raw(t.input_tokens),
        output_tokens: raw(t.output_tokens),
        cost: raw(t.cost),
        tags: { ...t.tags },
      })),
      budgets: f.budgets.map((b) => ({
        ...b,
        levels_fired: [...b.levels_fired],
        amount: raw(b.amount),
        spend: raw(b.spend),
        utilization_pct: raw(b.utilization_pct),
      })),
      reconciliation: f.reconciliation.map((r) => ({
        provider: r.provider,
        provider_cost: raw(r.provider_cost),
        meter_cost: raw(r.meter_cost),
        diff_usd: raw(r.diff_usd),
        diff_pct: rawOrNull(r.diff_pct),
      })),
    },
    indent,
  );
}
