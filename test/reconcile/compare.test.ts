import { describe, expect, it } from 'vitest';
import { Usd } from '../../src/reconcile/amount.js';
import { costModel } from '../../src/reconcile/anthropic.js';
import { reconcile } from '../../src/reconcile/compare.js';
import type { Mapping, MeterDay, ProviderCost, ProviderReport, ProviderUsage } from '../../src/reconcile/types.js';

const usd = (n: number) => BigInt(Math.round(n * 1e8));

function usage(over: Partial<ProviderUsage>): ProviderUsage {
  return {
    date: '2026-03-02',
    model: 'gpt-4o-2024-08-06',
    requests: 100n,
    input_tokens: 100_000n,
    cached_input_tokens: 20_000n,
    output_tokens: 10_000n,
    groups: { project: 'proj_a', api_key: 'key_a' },
    service_tier: null,
    batch: null,
    ...over,
  };
}
function cost(over: Partial<ProviderCost>): ProviderCost {
  return {
    date: '2026-03-02',
    model: 'gpt-4o-2024-08-06',
    item: 'input',
    description: 'x',
    amount: usd(0.2),
    groups: { project: 'proj_a' },
    ...over,
  };
}
function meter(over: Partial<MeterDay>): MeterDay {
  return {
    date: '2026-03-02',
    model: 'gpt-4o-2024-08-06',
    requests: 100n,
    input_tokens: 100_000n,
    cached_input_tokens: 20_000n,
    output_tokens: 10_000n,
    cost: usd(0.3),
    by_source: { provider: { calls: 100n, cost: usd(0.3) } },
    ...over,
  };
}
const report = (u: ProviderUsage[], c: ProviderCost[]): ProviderReport => ({
  provider: 'openai',
  usage: u,
  costs: c,
  costGroupable: ['project'],
});
const run = (r: ProviderReport, m: MeterDay[], extra: Partial<Parameters<typeof reconcile>[0]> = {}) =>
  reconcile({
    report: r,
    meter: m,
    mappings: [],
    from: '2026-03-01',
    to: '2026-04-01',
    firstIncompleteDay: '2026-03-20',
    ...extra,
  });

describe('reconcile: days, totals and findings', () => {
  it('agreement within the tolerance is no difference: no findings, the small difference still shown', () => {
    // Cost 0.4% apart, tokens 0.5% apart: inside 1% (and the cost inside max($0.01, 1%)).
    const r = run(
      report(
        [usage({ output_tokens: 10_050n })],
        [cost({ amount: usd(0.1) }), cost({ item: 'output', amount: usd(0.1988) })],
      ),
      [meter({})],
    );
    expect(r.days).toHaveLength(1);
    expect(r.days[0]!.provider).toEqual({
      requests: 100n,
      input_tokens: 100_000n,
      cached_input_tokens: 20_000n,
      output_tokens: 10_050n,
      cost: usd(0.2988),
    });
    expect(r.days[0]!.diff_usd).toBe(usd(0.0012));
    expect(r.days[0]!.diff_pct).toBe('0.40');
    expect(r.findings).toEqual([]);
    expect(r.totals).toEqual({
      provider_cost: usd(0.2988),
      meter_cost: usd(0.3),
      diff_usd: usd(0.0012),
      diff_pct: '0.40',
    });
  });

  it('a cent apart on a tiny day is within the $0.01 floor', () => {
    const r = run(report([usage({})], [cost({ amount: usd(0.291) })]), [meter({})]);
    expect(r.findings).toEqual([]);
  });

  it('bypass: the provider counts more calls and tokens than meter, naming the key or project', () => {
    const r = run(
      report(
        [
          usage({}),
          usage({
            groups: { project: 'proj_x', api_key: 'key_x' },
            requests: 30n,
            input_tokens: 9_000n,
            cached_input_tokens: 0n,
            output_tokens: 900n,
          }),
        ],
        [cost({ amount: usd(0.39) })],
      ),
      [meter({})],
    );
    const [f] = r.findings;
    expect(r.findings).toHaveLength(1);
    expect(f).toMatchObject({
      kind: 'bypass',
      date: '2026-03-02',
      model: 'gpt-4o-2024-08-06',
      extra_requests: 30n,
      extra_input_tokens: 9_000n,
      extra_output_tokens: 900n,
    });
    expect(f!.detail).toContain('30 more calls (130 vs 100)');
    expect(f!.detail).toContain('api key key_x');
    // With mappings, the ids no account claims are named as such.
    const mappings: Mapping[] = [
      { provider: 'openai', kind: 'project', external_id: 'proj_a', account_id: 'acc-1', account: 'acme' },
    ];
    const mapped = run(
      report(
        [usage({}), usage({ groups: { project: 'proj_x', api_key: 'key_x' }, requests: 30n })],
        [cost({ amount: usd(0.39) })],
      ),
      [meter({})],
      { mappings },
    );
    expect(mapped.findings[0]!.detail).toContain('api key key_x (not mapped to any account)');
    expect(mapped.findings[0]!.detail).not.toContain('key_a (not mapped');
  });

  it('price drift: tokens agree, cost does not; with the implied price per MTok', () => {
    // Provider bills output at $10/MTok (10,000 tokens = $0.10) and input $2.5/MTok; meter priced the day at $0.30.
    const r = run(
      report(
        [usage({})],
        [
          cost({ item: 'input', amount: usd(0.2) }),
          cost({ item: 'output', amount: usd(0.1) }),
          cost({ item: 'cached input', amount: usd(0.05) }),
        ],
      ),
      [meter({ cost: usd(0.6) })],
    );
    expect(r.findings).toHaveLength(1);
    const f = r.findings[0]!;
    expect(f.kind).toBe('price_drift');
    expect(f.implied_price_per_mtok).toEqual({
      blended: '3.18181818',
      input: '2.5',
      output: '10',
      'cached input': '2.5',
    });
    expect(f.detail).toContain('meter priced them at $0.6 and the provider at $0.35');
    expect(r.days[0]!.diff_pct).toBe('71.42');
  });

  it('meter-only: calls the provider does not show, by usage_source', () => {
    const r = run(report([], []), [
      meter({
        model: 'gpt-4o-mini',
        requests: 3n,
        input_tokens: 300n,
        cached_input_tokens: 0n,
        output_tokens: 90n,
        cost: usd(0.0001),
        by_source: { estimated: { calls: 3n, cost: usd(0.0001) }, none: { calls: 2n, cost: 0n } },
      }),
    ]);
    expect(r.findings).toHaveLength(1);
    expect(r.findings[0]).toMatchObject({
      kind: 'meter_only',
      model: 'gpt-4o-mini',
      by_usage_source: { estimated: { calls: 3n, cost: new Usd(usd(0.0001)) }, none: { calls: 2n, cost: new Usd(0n) } },
    });
    expect(r.findings[0]!.detail).toContain('calls the provider does not show at all');
    expect(r.findings[0]!.detail).toContain('3 estimated ($0.0001), 2 none ($0)');
    expect(r.days[0]!.diff_pct).toBeNull(); // the provider's figure is 0
  });

  it('a day not yet settled gets no findings', () => {
    const r = run(report([usage({ date: '2026-03-25', requests: 500n })], []), [meter({ date: '2026-03-25' })]);
    expect(r.days).toHaveLength(1);
    expect(r.findings).toEqual([]);
  });

  it("a dated snapshot in meter meets the provider's name; charges of no model are left out of the totals", () => {
    const r = run(
      report(
        [usage({})],
        [cost({ amount: usd(0.3) }), cost({ model: 'web search tool calls', item: null, amount: usd(5) })],
      ),
      [meter({ model: 'gpt-4o' })],
    );
    expect(r.days.map((d) => d.model)).toEqual(['gpt-4o-2024-08-06']);
    expect(r.findings).toEqual([]);
    expect(r.unattributed).toEqual([{ date: '2026-03-02', description: 'x', cost: usd(5) }]);
    expect(r.totals.provider_cost).toBe(usd(0.3));
  });

  it('an account is held against the rows of its mapped project or key only (a key mapping wins over its project)', () => {
    const mappings: Mapping[] = [
      { provider: 'openai', kind: 'project', external_id: 'proj_a', account_id: 'acc-1', account: 'acme' },
      { provider: 'openai', kind: 'api_key', external_id: 'key_b', account_id: 'acc-2', account: 'beta' },
    ];
    const u = [usage({}), usage({ groups: { project: 'proj_a', api_key: 'key_b' }, requests: 7n })];
    const r = run(report(u, [cost({ amount: usd(0.3) })]), [meter({})], {
      mappings,
      account: { id: 'acc-1', name: 'acme' },
    });
    expect(r.account).toBe('acme');
    expect(r.days[0]!.provider.requests).toBe(100n);
    expect(r.findings).toEqual([]);
    // beta's key is mapped but OpenAI's costs were not grouped by key here: its cost is unknown.
    const b = run(report(u, [cost({ amount: usd(0.3) })]), [meter({ requests: 7n })], {
      mappings,
      account: { id: 'acc-2', name: 'beta' },
    });
    expect(b.days[0]!.provider.cost).toBeNull();
    expect(b.totals.provider_cost).toBeNull();
  });
});

describe('charges the cost report leaves out or bills apart', () => {
  const claude = 'claude-sonnet-4-20250514';
  const anthropic = (u: ProviderUsage[], c: ProviderCost[]): ProviderReport => ({
    provider: 'anthropic',
    usage: u,
    costs: c,
    costGroupable: ['workspace'],
    costExcludesTiers: ['priority'],
  });
  const tokens = { requests: null, cached_input_tokens: 0n, groups: { workspace: null } };

  it("Priority Tier: tokens compared, meter's priority cost left out like the provider's: no price_drift", () => {
    const r = run(
      anthropic(
        [
          usage({ ...tokens, model: claude, input_tokens: 60_000n, output_tokens: 6_000n, service_tier: 'standard' }),
          usage({ ...tokens, model: claude, input_tokens: 40_000n, output_tokens: 4_000n, service_tier: 'priority' }),
        ],
        [cost({ model: claude, item: 'uncached_input_tokens', amount: usd(0.27), groups: { workspace: null } })],
      ),
      [
        meter({
          model: claude,
          cached_input_tokens: 0n,
          cost: usd(0.45),
          priority_cost: usd(0.18),
          web_search_cost: 0n,
        }),
      ],
    );
    expect(r.findings).toEqual([]);
    expect(r.days[0]!.meter.cost).toBe(usd(0.27));
    expect(r.days[0]!.diff_usd).toBe(0n);
    expect(r.meter_left_out).toEqual([
      { date: '2026-03-02', model: claude, description: expect.stringContaining('Priority Tier'), cost: usd(0.18) },
    ]);
  });

  it("Priority Tier past the raw events' retention: the costs are not compared (no finding either way)", () => {
    const r = run(
      anthropic(
        [usage({ ...tokens, model: claude, input_tokens: 100_000n, output_tokens: 10_000n, service_tier: 'priority' })],
        [],
      ),
      [meter({ model: claude, cached_input_tokens: 0n, cost: usd(0.45), priority_cost: null, web_search_cost: null })],
    );
    expect(r.findings.filter((f) => f.kind === 'price_drift')).toEqual([]);
  });

  it("web searches: meter's search fees come out of the model's cost and meet the provider's web_search lines", () => {
    const r = run(
      anthropic(
        [usage({ ...tokens, model: claude, input_tokens: 100_000n, output_tokens: 10_000n, service_tier: 'standard' })],
        [
          cost({ model: claude, item: 'uncached_input_tokens', amount: usd(0.45), groups: { workspace: null } }),
          cost({ model: null, item: null, tool: 'web_search', description: 'Web Search', amount: usd(0.05) }),
          cost({
            model: null,
            item: null,
            tool: 'code_execution',
            description: 'Code Execution Usage',
            amount: usd(1),
          }),
        ],
      ),
      [
        meter({
          model: claude,
          cached_input_tokens: 0n,
          cost: usd(0.5),
          priority_cost: 0n,
          web_search_cost: usd(0.05),
        }),
      ],
    );
    expect(r.findings).toEqual([]);
    const model = r.days.find((d) => d.model === claude)!;
    expect([model.meter.cost, model.provider.cost]).toEqual([usd(0.45), usd(0.45)]);
    const search = r.days.find((d) => d.model === '(web search)')!;
    expect([search.meter.cost, search.provider.cost, search.diff_usd]).toEqual([usd(0.05), usd(0.05), 0n]);
    // Code execution is not metered by meter: listed apart, never a drift.
    expect(r.unattributed.map((u) => u.description)).toEqual(['Code Execution Usage']);
  });

  it("the cost report's model as a display name is tied to the usage report's dated id", () => {
    const r = run(
      anthropic(
        [usage({ ...tokens, model: claude, input_tokens: 100_000n, output_tokens: 10_000n, service_tier: 'standard' })],
        [cost({ model: costModel('Claude Sonnet 4'), amount: usd(0.45), groups: { workspace: null } })],
      ),
      [meter({ model: claude, cached_input_tokens: 0n, cost: usd(0.45), priority_cost: 0n, web_search_cost: 0n })],
    );
    expect(r.unattributed).toEqual([]);
    expect(r.days[0]!.provider.cost).toBe(usd(0.45));
    expect(costModel('Claude 3.5 Haiku')).toBe('claude-3-5-haiku');
    expect(costModel(claude)).toBe(claude);
  });
});
