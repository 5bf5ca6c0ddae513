/**
 * Our price selection must agree with the catalogue's own (same model, same dated or
 * time-of-day entry, same long-context tier) — only the arithmetic differs. Checked across every
 * model of the nine providers, at several moments, against genai-prices' calcPrice.
 */
import { describe, it, expect } from 'vitest';
import { calcPrice, findProvider } from '@pydantic/genai-prices';
import { CATALOGUE_PROVIDER_ID, Pricer, PRICE_CLASSES, priceTable } from '../../src/pricing/index.js';
import type { PriceClass } from '../../src/pricing/units.js';
import { PROVIDER_SLUGS } from '../../src/providers/index.js';
import { usage } from './helpers.js';

const pricer = new Pricer();
const MOMENTS = [
  '2024-01-01T00:00:00Z',
  '2025-06-09T23:59:59Z',
  '2025-06-10T00:00:00Z',
  '2025-12-02T08:00:00Z',
  '2026-03-13T00:30:00Z',
  '2026-08-17T02:00:00Z',
  '2026-08-17T16:30:00Z',
  '2027-02-01T07:15:00Z',
].map((s) => new Date(s));
const KEYS = {
  input: 'input_mtok',
  cache_read: 'cache_read_mtok',
  cache_write: 'cache_write_mtok',
  cache_write_1h: 'cache_write_1h_mtok',
  output: 'output_mtok',
} as const;

describe('agreement with the catalogue', () => {
  it.each(PROVIDER_SLUGS)('%s: same model and same prices at every moment', (slug) => {
    const providerId = CATALOGUE_PROVIDER_ID[slug];
    const provider = findProvider({ providerId });
    expect(provider, `catalogue provider ${providerId}`).toBeDefined();
    let compared = 0;
    for (const model of provider!.models) {
      for (const at of MOMENTS) {
        const theirs = calcPrice({}, model.id, { providerId, timestamp: at });
        if (!theirs || theirs.model !== model) continue; // an id that its own pattern does not match
        const mine = priceTable(pricer, slug, model.id, at);
        const tokenKeys = Object.values(KEYS).filter((k) => theirs.model_price[k] !== undefined);
        if (!tokenKeys.length) {
          expect(mine.priced, `${slug} ${model.id} has no token prices`).toBe(false);
          continue;
        }
        expect(mine.matched_model).toBe(model.id);
        for (const cls of PRICE_CLASSES) {
          const key = (KEYS as Partial<Record<PriceClass, (typeof KEYS)[keyof typeof KEYS]>>)[cls];
          const v = key === undefined ? undefined : theirs.model_price[key];
          const row = mine.prices.find((r) => r.class === cls);
          if (v === undefined) {
            // no price of its own: billed as its parent class, or absent
            expect(row?.billed_as ?? null, `${slug} ${model.id} ${cls}`).not.toBe(cls);
            continue;
          }
          const base = typeof v === 'number' ? v : v.base;
          // String(n) is the catalogue's literal: our exact decimal must be the same number.
          expect(row?.usd_per_mtok, `${slug} ${model.id} ${cls} at ${at.toISOString()}`).toBe(String(base));
          if (typeof v !== 'number') {
            expect(row?.tiers.map((t) => [t.above_input_tokens, t.usd_per_mtok])).toEqual(
              v.tiers.map((t) => [t.start, String(t.price)]),
            );
          }
        }
        compared++;
      }
    }
    expect(compared).toBeGreaterThan(0);
  });

  it('exact costs stay within float error of the catalogue totals', () => {
    // The catalogue's float totals are only approximately right; ours must be within half a unit
    // of the 8th decimal of them (plus float noise), for mixed usage across long-context tiers.
    const cases: [(typeof PROVIDER_SLUGS)[number], string][] = [
      ['openai', 'gpt-4o'],
      ['openai', 'gpt-5.4'],
      ['anthropic', 'claude-sonnet-4-5'],
      ['anthropic', 'claude-opus-4-1'],
      ['gemini', 'gemini-2.5-pro'],
      ['deepseek', 'deepseek-chat'],
      ['groq', 'openai/gpt-oss-20b'],
      ['xai', 'grok-3-mini'],
    ];
    const at = new Date('2025-09-01T20:00:00Z');
    for (const [slug, model] of cases) {
      for (const input of [1, 999, 123457, 200001, 271999, 272001, 654321]) {
        const u = usage({
          inputTokens: input,
          cachedInputTokens: Math.floor(input / 3),
          cacheWriteTokens: Math.floor(input / 5),
          cacheWrite1hTokens: Math.floor(input / 11),
          outputTokens: 777,
        });
        const theirs = calcPrice(
          {
            input_tokens: input,
            cache_read_tokens: u.cachedInputTokens,
            cache_write_tokens: u.cacheWriteTokens,
            cache_write_1h_tokens: u.cacheWrite1hTokens,
            output_tokens: 777,
          },
          model,
          { providerId: CATALOGUE_PROVIDER_ID[slug], timestamp: at },
        )!;
        const mine = pricer.cost({ provider: slug, model, usage: u, time: at });
        expect(Math.abs(Number(mine.cost) - theirs.total_price), `${slug} ${model} ${input}`).toBeLessThanOrEqual(
          0.5e-8 + 1e-12,
        );
      }
    }
  });
});
