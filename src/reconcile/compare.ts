/**
 * Holds a provider's report against meter's figures, per UTC day and model: the differences,
 * the totals, and what the differences mean (bypass, price drift, meter-only). Pure: no I/O.
 */
import { abs, formatUnits, percentOf, Usd } from './amount.js';
import type {
  DayResult,
  Figures,
  Finding,
  Groups,
  Mapping,
  MeterDay,
  ProviderReport,
  Reconciliation,
  Tolerance,
} from './types.js';

/**
 * The tolerance a day and model may differ by before it is called a difference:
 * - cost: $0.01 or 1% of the provider's figure, whichever is larger. Provider reports are
 *   rounded (Anthropic's cost report is in cents; OpenAI's amounts are floats, the invoice is
 *   in cents), and meter's cost is exact to 1e-8: a few line items per day and model can each
 *   be half a cent apart from the exact sum;
 * - tokens and requests: 1% of the provider's figure. Both count exactly, but both put a call in
 *   a UTC day by their own clock: a call that starts before 00:00 UTC and ends after it can land
 *   in different days.
 */
export const DEFAULT_TOLERANCE: Tolerance = { usd: 1_000_000n, pct: 1 };

/** Whether `value` is within the tolerance of `reference` (the provider's figure). */
function within(value: bigint, reference: bigint, pct: number, floor = 0n): boolean {
  const allowed = (abs(reference) * BigInt(Math.round(pct * 100))) / 10_000n;
  return abs(value - reference) <= (allowed > floor ? allowed : floor);
}

/** The day's row of web-search fees: the provider bills them apart, meter within each call. */
export const WEB_SEARCH = '(web search)';

/** `claude-sonnet-4-20250514` and `gpt-4o-2024-08-06` → the model without its dated snapshot. */
const baseModel = (m: string) => m.replace(/-(\d{4}-\d{2}-\d{2}|\d{8})$/, '');

/** The account a provider row belongs to: an API key's mapping wins over its project's or workspace's. */
export function attribute(groups: Groups, byId: Map<string, Mapping>): Mapping | undefined {
  return (
    (groups.api_key ? byId.get(`api_key:${groups.api_key}`) : undefined) ??
    (groups.project ? byId.get(`project:${groups.project}`) : undefined) ??
    (groups.workspace ? byId.get(`workspace:${groups.workspace}`) : undefined)
  );
}

const groupLabel = (g: Groups) =>
  g.api_key
    ? `api key ${g.api_key}`
    : g.project
      ? `project ${g.project}`
      : g.workspace
        ? `workspace ${g.workspace}`
        : 'the organisation';

const count = (n: bigint) => n.toLocaleString('en-US');

export interface CompareInput {
  report: ProviderReport;
  meter: MeterDay[];
  mappings: Mapping[];
  /** The account reconciled, or undefined for the organisation against all accounts. */
  account?: { id: string; name: string };
  from: string;
  to: string;
  /** Days from this one on are not over (or not yet settled at the provider): no findings. */
  firstIncompleteDay: string;
  tolerance?: Tolerance;
}

export function reconcile(input: CompareInput): Reconciliation {
  const tol = input.tolerance ?? DEFAULT_TOLERANCE;
  const { report, account } = input;
  const byId = new Map(input.mappings.map((m) => [`${m.kind}:${m.external_id}`, m]));
  const inScope = (g: Groups) => !account || attribute(g, byId)?.account_id === account.id;
  // An account whose mappings the cost report cannot group by has no provider cost.
  const costKnown =
    !account ||
    input.mappings.filter((m) => m.account_id === account.id).every((m) => report.costGroupable.includes(m.kind));

  // Per day: the provider's models, then meter's models renamed to a provider model of the same
  // base when only the snapshot suffix differs.
  const key = (date: string, model: string) => `${date}\u0000${model}`;
  const rows = new Map<
    string,
    {
      date: string;
      model: string;
      provider: Figures;
      meter: Figures;
      groups: Map<string, Figures>;
      /** The provider's usage includes a tier its cost report leaves out, and meter's cost of
       *  that tier is not known (raw events past retention): the costs cannot be compared. */
      costUncomparable?: boolean;
      leftOutTier?: boolean;
    }
  >();
  // Charges the cost report leaves out (Anthropic's Priority Tier) come out of meter's cost too.
  const tiersLeftOut = new Set(report.costExcludesTiers ?? []);
  const meterLeftOut: Reconciliation['meter_left_out'] = [];
  const empty = (cost: bigint | null): Figures => ({
    requests: 0n,
    input_tokens: 0n,
    cached_input_tokens: 0n,
    output_tokens: 0n,
    cost,
  });
  const row = (date: string, model: string) => {
    let r = rows.get(key(date, model));
    if (!r)
      rows.set(
        key(date, model),
        (r = { date, model, provider: empty(costKnown ? 0n : null), meter: empty(0n), groups: new Map() }),
      );
    return r;
  };
  const add = (
    f: Figures,
    u: { requests: bigint | null; input_tokens: bigint; cached_input_tokens: bigint; output_tokens: bigint },
  ) => {
    f.requests = f.requests === null || u.requests === null ? null : f.requests + u.requests;
    f.input_tokens += u.input_tokens;
    f.cached_input_tokens += u.cached_input_tokens;
    f.output_tokens += u.output_tokens;
  };
  for (const u of report.usage) {
    if (u.date < input.from || u.date >= input.to || !inScope(u.groups)) continue;
    const r = row(u.date, u.model);
    add(r.provider, u);
    if (u.service_tier !== null && tiersLeftOut.has(u.service_tier)) r.leftOutTier = true;
    // Organisation-wide with mappings: an id no account claims is the likeliest bypass.
    const unclaimed = !account && input.mappings.length > 0 && !attribute(u.groups, byId);
    const label = `${groupLabel(u.groups)}${unclaimed ? ' (not mapped to any account)' : ''}`;
    const g = r.groups.get(label) ?? empty(null);
    add(g, u);
    r.groups.set(label, g);
  }
  const providerModels = new Map<string, Map<string, string>>(); // date → base → model
  for (const r of rows.values()) {
    const m = providerModels.get(r.date) ?? new Map<string, string>();
    m.set(baseModel(r.model), r.model);
    providerModels.set(r.date, m);
  }
  const resolve = (date: string, model: string) =>
    rows.has(key(date, model)) ? model : (providerModels.get(date)?.get(baseModel(model)) ?? model);
  const meterDays = new Map<string, MeterDay[]>();
  for (const m of input.meter) {
    if (m.date < input.from || m.date >= input.to) continue;
    const r = row(m.date, resolve(m.date, m.model));
    add(r.meter, m);
    // Web searches are billed on lines of their own: compared with those, not with the model's.
    const searches = m.web_search_cost ?? 0n;
    const priority = tiersLeftOut.has('priority') ? (m.priority_cost ?? null) : 0n;
    r.meter.cost! += m.cost - searches - (priority ?? 0n);
    if (priority === null) r.costUncomparable = true;
    else if (priority > 0n)
      meterLeftOut.push({
        date: m.date,
        model: r.model,
        description: "Priority Tier calls: not in the provider's cost report",
        cost: priority,
      });
    if (searches > 0n) row(m.date, WEB_SEARCH).meter.cost! += searches;
    const list = meterDays.get(key(r.date, r.model)) ?? [];
    list.push(m);
    meterDays.set(key(r.date, r.model), list);
  }
  const unattributed: Reconciliation['unattributed'] = [];
  const items = new Map<string, Map<string, bigint>>();
  for (const c of report.costs) {
    if (c.date < input.from || c.date >= input.to) continue;
    if (account && !(costKnown && inScope(c.groups))) continue;
    if (c.tool === 'web_search') {
      const w = row(c.date, WEB_SEARCH);
      w.provider.cost = (w.provider.cost ?? 0n) + c.amount;
      continue;
    }
    const model = c.model === null ? undefined : resolve(c.date, c.model);
    const r = model === undefined ? undefined : rows.get(key(c.date, model));
    if (!r) {
      unattributed.push({ date: c.date, description: c.description, cost: c.amount });
      continue;
    }
    r.provider.cost = (r.provider.cost ?? 0n) + c.amount;
    const byItem = items.get(key(r.date, r.model)) ?? new Map<string, bigint>();
    if (c.item) byItem.set(c.item, (byItem.get(c.item) ?? 0n) + c.amount);
    items.set(key(r.date, r.model), byItem);
  }

  const days: DayResult[] = [...rows.values()]
    .sort((a, b) => (a.date === b.date ? (a.model < b.model ? -1 : 1) : a.date < b.date ? -1 : 1))
    .map((r) => {
      const diff = r.provider.cost === null ? null : r.meter.cost! - r.provider.cost;
      const day: DayResult = {
        date: r.date,
        model: r.model,
        provider: r.provider,
        meter: r.meter,
        diff_usd: diff,
        diff_pct: diff === null ? null : percentOf(diff, r.provider.cost!),
        findings: [],
      };
      if (r.date < input.firstIncompleteDay)
        day.findings = findingsOf(
          day,
          r.groups,
          meterDays.get(key(r.date, r.model)) ?? [],
          items.get(key(r.date, r.model)),
          tol,
          !(r.leftOutTier && r.costUncomparable),
        );
      return day;
    });

  const providerCost = costKnown ? days.reduce((s, d) => s + (d.provider.cost ?? 0n), 0n) : null;
  const meterCost = days.reduce((s, d) => s + d.meter.cost!, 0n);
  const totalDiff = providerCost === null ? null : meterCost - providerCost;
  return {
    provider: report.provider,
    account: account?.name ?? null,
    from: input.from,
    to: input.to,
    tolerance: tol,
    days,
    totals: {
      provider_cost: providerCost,
      meter_cost: meterCost,
      diff_usd: totalDiff,
      diff_pct: totalDiff === null ? null : percentOf(totalDiff, providerCost!),
    },
    findings: days.flatMap((d) => d.findings),
    unattributed,
    meter_left_out: meterLeftOut,
  };
}

function findingsOf(
  d: DayResult,
  groups: Map<string, Figures>,
  meterDays: MeterDay[],
  items: Map<string, bigint> | undefined,
  tol: Tolerance,
  costComparable = true,
): Finding[] {
  const p = d.provider;
  const m = d.meter;
  const base = { date: d.date, model: d.model };
  const findings: Finding[] = [];
  const requestsKnown = p.requests !== null;
  const more = (a: bigint, b: bigint) => a > b && !within(a, b, tol.pct);
  const tokensAgree =
    within(m.input_tokens, p.input_tokens, tol.pct) &&
    within(m.cached_input_tokens, p.cached_input_tokens, tol.pct) &&
    within(m.output_tokens, p.output_tokens, tol.pct);
  const requestsAgree = !requestsKnown || within(m.requests!, p.requests!, tol.pct);

  // bypass: the provider counts more calls or tokens than meter saw.
  const moreCalls = requestsKnown && more(p.requests!, m.requests!);
  const moreTokens = more(p.input_tokens, m.input_tokens) || more(p.output_tokens, m.output_tokens);
  if (moreCalls || moreTokens) {
    const named = [...groups.entries()]
      .sort((a, b) => Number(b[1].input_tokens + b[1].output_tokens - (a[1].input_tokens + a[1].output_tokens)))
      .map(([label, g]) => ({
        id: label,
        requests: g.requests,
        input_tokens: g.input_tokens,
        output_tokens: g.output_tokens,
      }));
    const what = moreCalls
      ? `${count(p.requests! - m.requests!)} more calls (${count(p.requests!)} vs ${count(m.requests!)})`
      : `${count(p.input_tokens - m.input_tokens)} more input and ${count(p.output_tokens - m.output_tokens)} more output tokens`;
    findings.push({
      kind: 'bypass',
      ...base,
      detail: `${what} at the provider than through meter: traffic that did not go through a sidecar, from ${named
        .map((n) => n.id)
        .join(', ')}`,
      sources: named,
      extra_requests: moreCalls ? p.requests! - m.requests! : null,
      extra_input_tokens: p.input_tokens > m.input_tokens ? p.input_tokens - m.input_tokens : 0n,
      extra_output_tokens: p.output_tokens > m.output_tokens ? p.output_tokens - m.output_tokens : 0n,
    });
  }

  // meter-only: meter recorded calls or tokens the provider does not show.
  const sources = new Map<string, { calls: bigint; cost: bigint }>();
  for (const md of meterDays)
    for (const [source, s] of Object.entries(md.by_source)) {
      const t = sources.get(source) ?? { calls: 0n, cost: 0n };
      sources.set(source, { calls: t.calls + s.calls, cost: t.cost + s.cost });
    }
  const providerSilent = p.input_tokens === 0n && p.output_tokens === 0n && (p.requests ?? 0n) === 0n;
  const meterCalls = [...sources.values()].reduce((s, v) => s + v.calls, 0n);
  const meterExtra =
    (requestsKnown && more(m.requests!, p.requests!)) ||
    more(m.input_tokens, p.input_tokens) ||
    more(m.output_tokens, p.output_tokens) ||
    (providerSilent && meterCalls > 0n);
  if (meterExtra) {
    const by = Object.fromEntries(
      [...sources.entries()].map(([k, v]) => [k, { calls: v.calls, cost: new Usd(v.cost) }]),
    );
    const list = [...sources.entries()].map(([k, v]) => `${count(v.calls)} ${k} ($${formatUnits(v.cost)})`).join(', ');
    findings.push({
      kind: 'meter_only',
      ...base,
      detail: `meter recorded ${providerSilent ? 'calls the provider does not show at all' : 'more than the provider shows'}; by usage_source: ${list || 'none in the raw events (past retention)'}`,
      by_usage_source: by,
    });
  }

  // price drift: the tokens agree but the cost does not.
  if (
    tokensAgree &&
    requestsAgree &&
    costComparable &&
    !providerSilent &&
    p.cost !== null &&
    !within(m.cost!, p.cost, tol.pct, tol.usd)
  ) {
    const perMTok = (cost: bigint, tokens: bigint) =>
      tokens === 0n ? null : formatUnits((cost * 1_000_000n) / tokens);
    const implied: Record<string, string | null> = {
      blended: perMTok(p.cost, p.input_tokens + p.output_tokens),
    };
    for (const [item, cost] of items ?? []) {
      const i = item.toLowerCase();
      const tokens = i.includes('output')
        ? p.output_tokens
        : i.includes('cache_read') || i.includes('cached')
          ? p.cached_input_tokens
          : i.includes('input')
            ? p.input_tokens - p.cached_input_tokens
            : 0n;
      implied[item] = perMTok(cost, tokens);
    }
    findings.push({
      kind: 'price_drift',
      ...base,
      detail: `tokens agree but meter priced them at $${formatUnits(m.cost!)} and the provider at $${formatUnits(p.cost)}: the provider's implied price is $${implied.blended}/MTok blended against meter's $${perMTok(m.cost!, m.input_tokens + m.output_tokens)}; check the catalogue price of ${d.model}`,
      implied_price_per_mtok: implied,
      meter_price_per_mtok: perMTok(m.cost!, m.input_tokens + m.output_tokens),
    });
  }
  return findings;
}
