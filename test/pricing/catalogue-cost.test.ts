/**
 * Costs of real catalogue models (genai-prices 0.1.8), each computed by hand from the price the
 * catalogue publishes. Arithmetic is shown in USD-per-million-token units: the sum of
 * tokens × $/MTok, divided by 1e6, rounded half-even to 8 decimals.
 */
import { describe, it, expect } from 'vitest';
import { Pricer } from '../../src/pricing/index.js';
import { usage, T } from './helpers.js';

const pricer = new Pricer();
const NOON = T('2025-09-01T12:00:00Z');

describe('catalogue prices, exact to the 8th decimal', () => {
  it('OpenAI gpt-4o: cached input at the cache-read price, the rest at input', () => {
    // gpt-4o: input $2.50, cache read $1.25, output $10 per MTok.
    // 1234 prompt tokens of which 1000 cached → 234 × 2.5 + 1000 × 1.25 + 567 × 10
    //   = 585 + 1250 + 5670 = 7505 → $0.007505
    const r = pricer.cost({
      provider: 'openai',
      model: 'gpt-4o-2024-08-06',
      usage: usage({ inputTokens: 1234, cachedInputTokens: 1000, outputTokens: 567 }),
      time: NOON,
    });
    expect(r).toMatchObject({ cost: '0.00750500', unpriced: false, matchedModel: 'gpt-4o', source: 'catalogue' });
  });

  it('OpenAI reasoning tokens are part of output and not billed twice', () => {
    // gpt-4o-mini: input $0.15, output $0.60. outputTokens 300 already includes 200 reasoning tokens:
    // 1000 × 0.15 + 300 × 0.6 = 150 + 180 = 330 → $0.00033
    const r = pricer.cost({
      provider: 'openai',
      model: 'gpt-4o-mini',
      usage: usage({ inputTokens: 1000, outputTokens: 300, reasoningTokens: 200 }),
      time: NOON,
    });
    expect(r.cost).toBe('0.00033000');
  });

  it('Anthropic: cache reads, 5-minute writes and 1-hour writes each at their own price', () => {
    // claude-sonnet-4-5 (≤ 200k input): input $3, cache read $0.30, cache write $3.75, 1h write $6, output $15.
    // 10000 input = 5000 uncached + 2000 read + 3000 written (1000 of them with a 1h TTL):
    // 5000×3 + 2000×0.3 + 2000×3.75 + 1000×6 + 500×15 = 15000 + 600 + 7500 + 6000 + 7500 = 36600 → $0.0366
    const r = pricer.cost({
      provider: 'anthropic',
      model: 'claude-sonnet-4-5-20250929',
      usage: usage({
        inputTokens: 10000,
        cachedInputTokens: 2000,
        cacheWriteTokens: 3000,
        cacheWrite1hTokens: 1000,
        outputTokens: 500,
      }),
      time: NOON,
    });
    expect(r).toMatchObject({ cost: '0.03660000', matchedModel: 'claude-sonnet-4-5' });
  });

  it('Anthropic 1h writes alone: claude-opus-4-1 charges $30/MTok for them, $18.75 for 5m', () => {
    // 4000 input = 1000 uncached + 3000 written with a 1h TTL; 100 output:
    // 1000×15 + 3000×30 + 100×75 = 15000 + 90000 + 7500 = 112500 → $0.1125
    const oneHour = pricer.cost({
      provider: 'anthropic',
      model: 'claude-opus-4-1',
      usage: usage({ inputTokens: 4000, cacheWriteTokens: 3000, cacheWrite1hTokens: 3000, outputTokens: 100 }),
      time: NOON,
    });
    expect(oneHour.cost).toBe('0.11250000');
    // Same tokens written with the 5-minute TTL: 1000×15 + 3000×18.75 + 100×75 = 15000 + 56250 + 7500 = 78750
    const fiveMin = pricer.cost({
      provider: 'anthropic',
      model: 'claude-opus-4-1',
      usage: usage({ inputTokens: 4000, cacheWriteTokens: 3000, outputTokens: 100 }),
      time: NOON,
    });
    expect(fiveMin.cost).toBe('0.07875000');
  });

  describe('long-context tier re-prices the whole request above the threshold', () => {
    // claude-sonnet-4-5: above 200000 total input tokens every class doubles (output × 1.5):
    // input 3→6, read 0.3→0.6, write 3.75→7.5, 1h write 6→12, output 15→22.5.
    const at = (inputTokens: number) =>
      pricer.cost({
        provider: 'anthropic',
        model: 'claude-sonnet-4-5',
        usage: usage({
          inputTokens,
          cachedInputTokens: 50000,
          cacheWriteTokens: 10000,
          cacheWrite1hTokens: 4000,
          outputTokens: 1000,
        }),
        time: NOON,
      }).cost;

    it('exactly 200000 input tokens: base prices', () => {
      // 140000×3 + 50000×0.3 + 6000×3.75 + 4000×6 + 1000×15 = 420000 + 15000 + 22500 + 24000 + 15000 = 496500
      expect(at(200000)).toBe('0.49650000');
    });
    it('200001 input tokens: long-context prices on every token', () => {
      // 140001×6 + 50000×0.6 + 6000×7.5 + 4000×12 + 1000×22.5 = 840006 + 30000 + 45000 + 48000 + 22500 = 985506
      expect(at(200001)).toBe('0.98550600');
    });

    it('Gemini 2.5 Pro, with the models/ prefix stripped', () => {
      // gemini-2.5-pro: ≤200k input $1.25, cache read $0.125, output $10; above: $2.50, $0.25, $15.
      // 200000 input, 100000 cached, 2000 output (thoughts included):
      //   100000×1.25 + 100000×0.125 + 2000×10 = 125000 + 12500 + 20000 = 157500 → $0.1575
      // 200001 input: 100001×2.5 + 100000×0.25 + 2000×15 = 250002.5 + 25000 + 30000 = 305002.5 → $0.3050025
      const g = (model: string, inputTokens: number) =>
        pricer.cost({
          provider: 'gemini',
          model,
          usage: usage({ inputTokens, cachedInputTokens: 100000, outputTokens: 2000 }),
          time: NOON,
        });
      expect(g('models/gemini-2.5-pro', 200000).cost).toBe('0.15750000');
      expect(g('models/gemini-2.5-pro', 200001).cost).toBe('0.30500250');
      expect(g('gemini-2.5-pro', 200001)).toMatchObject({ cost: '0.30500250', matchedModel: 'gemini-2.5-pro' });
    });

    it('OpenAI gpt-5.4 tier starts above 271999 input tokens', () => {
      // gpt-5.4: input $2.50 → $5, output $15 → $22.50 once input > 271999.
      // 271999×2.5 + 10×15 = 679997.5 + 150 = 680147.5 → $0.6801475
      // 272000×5 + 10×22.5 = 1360000 + 225 = 1360225 → $1.360225
      const c = (inputTokens: number) =>
        pricer.cost({
          provider: 'openai',
          model: 'gpt-5.4',
          usage: usage({ inputTokens, outputTokens: 10 }),
          time: NOON,
        }).cost;
      expect(c(271999)).toBe('0.68014750');
      expect(c(272000)).toBe('1.36022500');
    });
  });

  it('dated price: OpenAI o3 dropped from $10/$40 to $2/$8 on 2025-06-10 (UTC)', () => {
    // 1000 input + 1000 output: before 1000×10 + 1000×40 = 50000 → $0.05; after 1000×2 + 1000×8 = 10000 → $0.01
    const c = (iso: string) =>
      pricer.cost({
        provider: 'openai',
        model: 'o3',
        usage: usage({ inputTokens: 1000, outputTokens: 1000 }),
        time: T(iso),
      }).cost;
    expect(c('2025-06-09T23:59:59.999Z')).toBe('0.05000000');
    expect(c('2025-06-10T00:00:00.000Z')).toBe('0.01000000');
  });

  it('time-of-day price: DeepSeek standard 00:30–16:30 UTC, discount otherwise', () => {
    // deepseek-chat standard: input (cache miss) $0.27, cache hit $0.07, output $1.10;
    // off-peak: $0.135, $0.035, $0.55. 10000 prompt tokens of which 4000 cache hits, 3000 output:
    // standard 6000×0.27 + 4000×0.07 + 3000×1.1 = 1620 + 280 + 3300 = 5200 → $0.0052
    // off-peak 6000×0.135 + 4000×0.035 + 3000×0.55 = 810 + 140 + 1650 = 2600 → $0.0026
    const c = (iso: string) =>
      pricer.cost({
        provider: 'deepseek',
        model: 'deepseek-chat',
        usage: usage({ inputTokens: 10000, cachedInputTokens: 4000, outputTokens: 3000 }),
        time: T(iso),
      }).cost;
    expect(c('2025-03-01T12:00:00Z')).toBe('0.00520000');
    expect(c('2025-03-01T00:30:00Z')).toBe('0.00520000');
    expect(c('2025-03-01T16:29:59.999Z')).toBe('0.00520000');
    expect(c('2025-03-01T16:30:00Z')).toBe('0.00260000');
    expect(c('2025-03-01T00:29:59Z')).toBe('0.00260000');
    expect(c('2025-03-01T20:00:00Z')).toBe('0.00260000');
  });

  describe('ties at the 9th decimal round half-even, where float totals go wrong', () => {
    it('Groq openai/gpt-oss-20b: $0.075 in, $0.30 out', () => {
      // 1 in + 53 out: 0.075 + 15.9 = 15.975 → $0.000015975: tie, 7 is odd → up to 0.00001598
      // (the catalogue's float total prints 0.00001597 with toFixed(8)).
      const c = (i: number, o: number) =>
        pricer.cost({
          provider: 'groq',
          model: 'openai/gpt-oss-20b',
          usage: usage({ inputTokens: i, outputTokens: o }),
          time: NOON,
        }).cost;
      expect(c(1, 53)).toBe('0.00001598');
      // 3 in: 0.225 → $0.000000225: tie, 2 is even → stays 0.00000022
      expect(c(3, 0)).toBe('0.00000022');
      // 1 in: 0.075 → $0.000000075: tie, 7 is odd → 0.00000008
      expect(c(1, 0)).toBe('0.00000008');
    });
    it('DeepSeek off-peak: 1 in + 1 out = $0.000000685 → 8 is even → 0.00000068', () => {
      // 0.135 + 0.55 = 0.685 (the float total rounds this to 0.00000069).
      const r = pricer.cost({
        provider: 'deepseek',
        model: 'deepseek-chat',
        usage: usage({ inputTokens: 1, outputTokens: 1 }),
        time: T('2025-03-01T20:00:00Z'),
      });
      expect(r.cost).toBe('0.00000068');
    });
  });

  it('Groq with its own provider id: llama-3.3-70b-versatile at $0.59 / $0.79', () => {
    // 1234×0.59 + 567×0.79 = 728.06 + 447.93 = 1175.99 → $0.00117599
    const r = pricer.cost({
      provider: 'groq',
      model: 'llama-3.3-70b-versatile',
      usage: usage({ inputTokens: 1234, outputTokens: 567 }),
      time: NOON,
    });
    expect(r).toMatchObject({ cost: '0.00117599', matchedModel: 'llama-3.3-70b-versatile' });
  });

  it('Groq openai/gpt-oss-120b is priced at Groq’s price, not OpenAI’s', () => {
    // Groq: input $0.15, cache read $0.075, output $0.60. 2000 in (1000 cached), 1000 out:
    // 1000×0.15 + 1000×0.075 + 1000×0.6 = 150 + 75 + 600 = 825 → $0.000825
    const r = pricer.cost({
      provider: 'groq',
      model: 'openai/gpt-oss-120b',
      usage: usage({ inputTokens: 2000, cachedInputTokens: 1000, outputTokens: 1000 }),
      time: NOON,
    });
    expect(r).toMatchObject({ cost: '0.00082500', matchedModel: 'openai/gpt-oss-120b' });
  });

  it('Together, model names matched case-insensitively', () => {
    // meta-llama/Llama-3.3-70B-Instruct-Turbo: $0.88 in and out. 1000 + 2000 tokens × 0.88 = 2640 → $0.00264
    for (const model of ['meta-llama/Llama-3.3-70B-Instruct-Turbo', 'meta-llama/llama-3.3-70b-instruct-turbo']) {
      const r = pricer.cost({
        provider: 'together',
        model,
        usage: usage({ inputTokens: 1000, outputTokens: 2000 }),
        time: NOON,
      });
      expect(r).toMatchObject({ cost: '0.00264000', matchedModel: 'meta-llama/Llama-3.3-70B-Instruct-Turbo' });
    }
  });

  it('Mistral, Cohere and xAI', () => {
    // mistral-small-latest $0.10 / $0.30: 5000×0.1 + 700×0.3 = 500 + 210 = 710 → $0.00071
    expect(
      pricer.cost({
        provider: 'mistral',
        model: 'mistral-small-latest',
        usage: usage({ inputTokens: 5000, outputTokens: 700 }),
        time: NOON,
      }).cost,
    ).toBe('0.00071000');
    // command-r (dated name command-r-08-2024) $0.15 / $0.60: 333×0.15 + 77×0.6 = 49.95 + 46.2 = 96.15 → $0.00009615
    expect(
      pricer.cost({
        provider: 'cohere',
        model: 'command-r-08-2024',
        usage: usage({ inputTokens: 333, outputTokens: 77 }),
        time: NOON,
      }).cost,
    ).toBe('0.00009615');
    // grok-3-mini $0.30 in, $0.075 cache read, $0.50 out; output includes reasoning:
    // 800×0.3 + 200×0.075 + 1500×0.5 = 240 + 15 + 750 = 1005 → $0.001005
    expect(
      pricer.cost({
        provider: 'xai',
        model: 'grok-3-mini',
        usage: usage({ inputTokens: 1000, cachedInputTokens: 200, outputTokens: 1500, reasoningTokens: 1200 }),
        time: NOON,
      }).cost,
    ).toBe('0.00100500');
  });

  it('falls back to the requested model when the response model is unpriced', () => {
    // xAI answers grok-3-mini-high for a grok-3-mini request; the catalogue only knows grok-3-mini:
    // 1000×0.3 + 500×0.5 = 300 + 250 = 550 → $0.00055
    const r = pricer.cost({
      provider: 'xai',
      model: 'grok-3-mini-high',
      requestedModel: 'grok-3-mini',
      usage: usage({ inputTokens: 1000, outputTokens: 500 }),
      time: NOON,
    });
    expect(r).toMatchObject({
      cost: '0.00055000',
      unpriced: false,
      matchedModel: 'grok-3-mini',
      pricedModel: 'grok-3-mini',
    });
  });

  it('prefers the response model when both are priced', () => {
    // Request gpt-4o, response gpt-4o-mini → priced as gpt-4o-mini: 1000×0.15 = 150 → $0.00015
    const r = pricer.cost({
      provider: 'openai',
      model: 'gpt-4o-mini',
      requestedModel: 'gpt-4o',
      usage: usage({ inputTokens: 1000, outputTokens: 0 }),
      time: NOON,
    });
    expect(r).toMatchObject({ cost: '0.00015000', matchedModel: 'gpt-4o-mini' });
  });

  it('unknown model: cost 0, flagged unpriced, never throws', () => {
    for (const input of [
      { model: 'no-such-model', requestedModel: 'nor-this' },
      { model: undefined, requestedModel: undefined },
      { model: '', requestedModel: null },
      { model: '   ' },
    ]) {
      const r = pricer.cost({
        provider: 'together',
        ...input,
        usage: usage({ inputTokens: 1000, outputTokens: 1000 }),
        time: NOON,
      });
      expect(r.cost).toBe('0.00000000');
      expect(r.unpriced).toBe(true);
      expect(r.matchedModel).toBeUndefined();
      expect(r.priceVersion).toBe(pricer.priceVersion);
    }
  });

  it('a catalogue model of another provider is not used for this one', () => {
    // gpt-4o exists for openai, not for groq: the explicit provider id keeps the lookup honest.
    const r = pricer.cost({
      provider: 'groq',
      model: 'gpt-4o',
      usage: usage({ inputTokens: 1000, outputTokens: 1000 }),
      time: NOON,
    });
    expect(r.unpriced).toBe(true);
  });

  it('inconsistent usage is clamped, not thrown', () => {
    // More cached than input: all 100 input tokens are cache reads (gpt-4o $1.25): 100×1.25 = 125 → $0.000125.
    const r = pricer.cost({
      provider: 'openai',
      model: 'gpt-4o',
      usage: usage({ inputTokens: 100, cachedInputTokens: 500, outputTokens: Number.NaN }),
      time: NOON,
    });
    expect(r.cost).toBe('0.00012500');
    // An invalid date falls back to the first (default) price entry: o3 $10 in → 1000×10 = 10000 → $0.01
    const d = pricer.cost({
      provider: 'openai',
      model: 'o3',
      usage: usage({ inputTokens: 1000, outputTokens: 0 }),
      time: new Date('nope'),
    });
    expect(d.cost).toBe('0.01000000');
  });

  it('price version names the catalogue', () => {
    expect(pricer.priceVersion).toBe('genai-prices@0.1.8');
  });
});
