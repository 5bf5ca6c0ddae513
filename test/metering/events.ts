import type { UsageEvent } from '../../src/metering/event.js';
import { uuidv7 } from '../../src/metering/ids.js';

export const ACCOUNTS = ['0190a8e0-0000-7000-8000-0000000000a1', '0190a8e0-0000-7000-8000-0000000000a2'];
const MODELS = ['gpt-4o', 'gpt-4o-mini', 'claude-sonnet-4-5'];

/** A seeded generator, so a failing run can be replayed. */
export function rng(seed: number): () => number {
  let s = seed >>> 0 || 1;
  return () => (s = (s * 1103515245 + 12345) >>> 0) / 2 ** 32;
}

/** Usage events spread over accounts, days, models and tags, with costs that need all 8
 *  decimals (and some large ones), so a float sum anywhere would show. */
export function makeEvents(n: number, seed = 1, over: Partial<UsageEvent> = {}): UsageEvent[] {
  const r = rng(seed);
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(r() * xs.length)]!;
  return Array.from({ length: n }, (): UsageEvent => {
    const day = 1 + Math.floor(r() * 3);
    const time = new Date(
      Date.UTC(2026, 2, day, Math.floor(r() * 24), Math.floor(r() * 60), 0, Math.floor(r() * 1000)),
    );
    const units = BigInt(Math.floor(r() * 1e8)) * (r() < 0.05 ? 100_000n : 1n) + BigInt(Math.floor(r() * 3));
    const tags: Record<string, string> = {};
    if (r() < 0.8) tags.team = pick(['search', 'ads', 'chat', 'ops']);
    if (r() < 0.5) tags.env = pick(['prod', 'dev']);
    if (r() < 0.1) tags.note = 'quote " backslash \\ comma , brace {';
    const input = Math.floor(r() * 5000);
    return {
      id: uuidv7(time.getTime()),
      time: time.toISOString(),
      accountId: pick(ACCOUNTS),
      keyId: 'a1b2c3d4e5f6',
      provider: 'openai',
      model: pick(MODELS),
      requestedModel: r() < 0.5 ? null : 'gpt-4o',
      status: r() < 0.9 ? 200 : 429,
      inputTokens: input,
      outputTokens: Math.floor(r() * 2000),
      cachedInputTokens: Math.floor(input / 3),
      cacheWriteTokens: 0,
      reasoningTokens: Math.floor(r() * 10),
      cost: formatUnits(units),
      unpriced: false,
      priceVersion: 'test-1',
      usageSource: 'provider',
      latencyMs: r() * 1000,
      ttfbMs: r() < 0.2 ? null : r() * 100,
      stream: r() < 0.5,
      tags,
      providerCostTicks: r() < 0.1 ? '12345678901' : null,
      ...over,
    };
  });
}

/** USD with 8 decimals from units of 1e-8. */
export function formatUnits(units: bigint): string {
  const s = units.toString().padStart(9, '0');
  return `${s.slice(0, -8)}.${s.slice(-8)}`;
}

export function parseUnits(cost: string): bigint {
  const [i, f = ''] = cost.split('.');
  return BigInt(i!) * 100_000_000n + BigInt(f.padEnd(8, '0'));
}

/** Exact spend and count per rollup key, summed in BigInt from the events themselves. */
export function expectedDaily(events: UsageEvent[]): Map<string, { spend: string; requests: number; input: number }> {
  const acc = new Map<string, { units: bigint; requests: number; input: number }>();
  for (const e of events) {
    const key = `${e.accountId}|${e.time.slice(0, 10)}|${e.provider}|${e.model}`;
    const a = acc.get(key) ?? { units: 0n, requests: 0, input: 0 };
    a.units += parseUnits(e.cost);
    a.requests++;
    a.input += e.inputTokens;
    acc.set(key, a);
  }
  return new Map([...acc].map(([k, a]) => [k, { spend: formatUnits(a.units), requests: a.requests, input: a.input }]));
}
