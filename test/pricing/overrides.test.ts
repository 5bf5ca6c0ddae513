import { createHash } from 'node:crypto';
import { describe, it, expect } from 'vitest';
import { Pricer } from '../../src/pricing/index.js';
import { usage, tempFile, T } from './helpers.js';

const NOON = T('2025-09-01T12:00:00Z');

const JSON_FILE = `{
  "providers": {
    "openai": {
      "models": {
        "ft:gpt-4o-mini-2024-07-18:acme::*": { "input_mtok": "0.30", "cache_read_mtok": "0.15", "output_mtok": "1.20" },
        "gpt-4o": { "input_mtok": "2", "output_mtok": "8" }
      }
    },
    "anthropic": {
      "discount_pct": 10,
      "models": { "claude-opus-4-1": { "discount_pct": "25" } }
    },
    "together": {
      "models": {
        "deepseek-ai/DeepSeek-V3": { "input_mtok": 1.25, "output_mtok": 1.25 },
        "my-llama": { "same_as": "meta-llama/Llama-3.3-70B-Instruct-Turbo" }
      }
    }
  }
}
`;

// The same content as YAML, numbers unquoted.
const YAML_FILE = `
providers:
  openai:
    models:
      "ft:gpt-4o-mini-2024-07-18:acme::*":
        input_mtok: 0.30
        cache_read_mtok: 0.15
        output_mtok: 1.20
      gpt-4o: { input_mtok: 2, output_mtok: 8 }
  anthropic:
    discount_pct: 10
    models:
      claude-opus-4-1:
        discount_pct: 25
  together:
    models:
      deepseek-ai/DeepSeek-V3:
        input_mtok: 1.25
        output_mtok: 1.25
      my-llama:
        same_as: meta-llama/Llama-3.3-70B-Instruct-Turbo
`;

describe.each([
  ['prices.json', JSON_FILE],
  ['prices.yaml', YAML_FILE],
])('overrides from %s', (name, content) => {
  const pricer = new Pricer({ pricesFile: tempFile(name, content) });
  const cost = (provider: Parameters<Pricer['cost']>[0]['provider'], model: string, u: ReturnType<typeof usage>) =>
    pricer.cost({ provider, model, usage: u, time: NOON });

  it('adds a fine-tuned model family by prefix', () => {
    // $0.30 in, $0.15 cached, $1.20 out: 1000 in (400 cached) + 100 out:
    // 600×0.3 + 400×0.15 + 100×1.2 = 180 + 60 + 120 = 360 → $0.00036
    const r = cost(
      'openai',
      'ft:gpt-4o-mini-2024-07-18:acme::AbC123',
      usage({ inputTokens: 1000, cachedInputTokens: 400, outputTokens: 100 }),
    );
    expect(r).toMatchObject({
      cost: '0.00036000',
      unpriced: false,
      source: 'override',
      matchedModel: 'ft:gpt-4o-mini-2024-07-18:acme::*',
    });
  });

  it('wins over the catalogue', () => {
    // gpt-4o overridden to $2 / $8 (catalogue: $2.50 / $10). No cache price given, so the
    // 500 cached tokens are input tokens: 1000×2 + 1000×8 = 10000 → $0.01
    const r = cost('openai', 'gpt-4o', usage({ inputTokens: 1000, cachedInputTokens: 500, outputTokens: 1000 }));
    expect(r).toMatchObject({ cost: '0.01000000', source: 'override', matchedModel: 'gpt-4o' });
    // Other OpenAI models keep the catalogue price: gpt-4o-mini 1000×0.15 = 150 → $0.00015
    expect(cost('openai', 'gpt-4o-mini', usage({ inputTokens: 1000, outputTokens: 0 }))).toMatchObject({
      cost: '0.00015000',
      source: 'catalogue',
    });
  });

  it('a provider discount applies to catalogue prices, rounded once after the discount', () => {
    // claude-sonnet-4-5 $3 / $15, 10% off: (1000×3 + 1000×15) × 0.9 = 18000 × 0.9 = 16200 → $0.0162
    const r = cost('anthropic', 'claude-sonnet-4-5', usage({ inputTokens: 1000, outputTokens: 1000 }));
    expect(r).toMatchObject({ cost: '0.01620000', source: 'catalogue' });
    // One token written to the 5m cache ($3.75): 3.75 × 0.9 = 3.375 → $0.000003375: tie, 7 is odd → 0.00000338
    expect(
      cost('anthropic', 'claude-sonnet-4-5', usage({ inputTokens: 1, cacheWriteTokens: 1, outputTokens: 0 })).cost,
    ).toBe('0.00000338');
  });

  it('a model discount replaces the provider discount', () => {
    // claude-opus-4-1 $15 / $75, 25% off (not 10%): (1000×15 + 100×75) × 0.75 = 22500 × 0.75 = 16875 → $0.016875
    const r = cost('anthropic', 'claude-opus-4-1-20250805', usage({ inputTokens: 1000, outputTokens: 100 }));
    expect(r).toMatchObject({ cost: '0.01687500', source: 'override', matchedModel: 'claude-opus-4-1' });
  });

  it('adds a model missing from the stale Together catalogue, and aliases another', () => {
    // deepseek-ai/DeepSeek-V3 at $1.25 both ways (not in the catalogue): 3000 × 1.25 = 3750 → $0.00375
    expect(cost('together', 'deepseek-ai/deepseek-v3', usage({ inputTokens: 1000, outputTokens: 2000 }))).toMatchObject(
      { cost: '0.00375000', source: 'override' },
    );
    // my-llama = meta-llama/Llama-3.3-70B-Instruct-Turbo ($0.88 both ways): 3000 × 0.88 = 2640 → $0.00264
    expect(cost('together', 'my-llama', usage({ inputTokens: 1000, outputTokens: 2000 }))).toMatchObject({
      cost: '0.00264000',
      matchedModel: 'meta-llama/Llama-3.3-70B-Instruct-Turbo',
    });
  });

  it('names the overrides in the price version', () => {
    const hash = createHash('sha256').update(content).digest('hex').slice(0, 8);
    expect(pricer.priceVersion).toBe(`genai-prices@0.1.8+ovr:${hash}`);
  });
});

describe('rounding ties at the 9th decimal (half-even), from a prices file', () => {
  const pricer = new Pricer({
    pricesFile: tempFile(
      'ties.yaml',
      `
providers:
  openai:
    models:
      tie-a: { input_mtok: "0.005", output_mtok: "0.025" }
      tie-sum: { input_mtok: "0.002", output_mtok: "0.003" }
      fine: { input_mtok: "0.1234567891234" }
      disc: { input_mtok: "3", discount_pct: "12.5" }
`,
    ),
  });
  const c = (model: string, inputTokens: number, outputTokens = 0) =>
    pricer.cost({ provider: 'openai', model, usage: usage({ inputTokens, outputTokens }), time: NOON }).cost;

  it('rounds a half down to an even 8th digit and up to an even 8th digit', () => {
    // 1 × 0.005 = $0.000000005: 0.00000000|5 → 0 is even → 0.00000000
    expect(c('tie-a', 1)).toBe('0.00000000');
    // 3 × 0.005 = $0.000000015: 0.00000001|5 → 1 is odd → 0.00000002
    expect(c('tie-a', 3)).toBe('0.00000002');
    // 1 × 0.025 output = $0.000000025 → 2 even → 0.00000002;  3 × 0.025 = 0.000000075 → 7 odd → 0.00000008
    expect(c('tie-a', 0, 1)).toBe('0.00000002');
    expect(c('tie-a', 0, 3)).toBe('0.00000008');
    // Two halves that sum to an exact value: 1 × 0.005 + 1 × 0.025 = 0.03 → $0.00000003
    // (rounding each class first would give 0.00000000 + 0.00000002)
    expect(c('tie-a', 1, 1)).toBe('0.00000003');
  });

  it('rounds the sum once, not each token class', () => {
    // 1 × 0.002 + 1 × 0.003 = 0.005 → $0.000000005 → 0.00000000 (per-class rounding would also give 0)
    expect(c('tie-sum', 1, 1)).toBe('0.00000000');
    // 3 × 0.002 + 3 × 0.003 = 0.015 → $0.000000015 → 0.00000002; rounding each class first
    // (0.000000006 → 0.00000001, 0.000000009 → 0.00000001) would also give 2, so check 7 + 1:
    // 7 × 0.002 + 1 × 0.003 = 0.017 → $0.000000017 → 0.00000002 (per class: 0.00000001 + 0 = 0.00000001)
    expect(c('tie-sum', 7, 1)).toBe('0.00000002');
  });

  it('keeps prices finer than 1e-9 $/MTok exact', () => {
    // 1,000,000 × 0.1234567891234 $/MTok = $0.1234567891234 → 0.12345679
    expect(c('fine', 1_000_000)).toBe('0.12345679');
    // 5 × 0.1234567891234 = 0.617283945617 → $0.000000617283945617 → 0.00000062
    expect(c('fine', 5)).toBe('0.00000062');
  });

  it('discounts exactly: 12.5% off $3 is $2.625', () => {
    // 1 × 2.625 = $0.000002625: tie, 2 is even → 0.00000262
    expect(c('disc', 1)).toBe('0.00000262');
    // 3 × 2.625 = 7.875 → $0.000007875: tie, 7 is odd → 0.00000788
    expect(c('disc', 3)).toBe('0.00000788');
  });
});

describe('tiers in a prices file', () => {
  const pricer = new Pricer({
    pricesFile: tempFile(
      'tiers.json',
      JSON.stringify({
        providers: {
          anthropic: {
            models: {
              'my-claude': {
                input_mtok: '3',
                cache_read_mtok: '0.3',
                output_mtok: '15',
                tiers: [{ above_input_tokens: 1000, input_mtok: '6', output_mtok: '22.5' }],
              },
            },
          },
        },
      }),
    ),
  });
  const c = (inputTokens: number) =>
    pricer.cost({
      provider: 'anthropic',
      model: 'my-claude',
      usage: usage({ inputTokens, cachedInputTokens: 100, outputTokens: 10 }),
      time: NOON,
    }).cost;

  it('re-prices the whole request above the threshold; classes a tier omits keep their price', () => {
    // 1000 input (100 cached): 900×3 + 100×0.3 + 10×15 = 2700 + 30 + 150 = 2880 → $0.00288
    expect(c(1000)).toBe('0.00288000');
    // 1001 input: 901×6 + 100×0.3 + 10×22.5 = 5406 + 30 + 225 = 5661 → $0.005661
    expect(c(1001)).toBe('0.00566100');
  });
});

describe('price version', () => {
  it('changes when the overrides change and not otherwise', () => {
    const a = tempFile('v-a.yaml', 'providers:\n  openai:\n    models:\n      x: { input_mtok: "1" }\n');
    const b = tempFile('v-b.yaml', 'providers:\n  openai:\n    models:\n      x: { input_mtok: "2" }\n');
    const a2 = tempFile('v-a2.yaml', 'providers:\n  openai:\n    models:\n      x: { input_mtok: "1" }\n');
    const va = new Pricer({ pricesFile: a }).priceVersion;
    expect(va).toMatch(/^genai-prices@0\.1\.8\+ovr:[0-9a-f]{8}$/);
    expect(new Pricer({ pricesFile: b }).priceVersion).not.toBe(va);
    expect(new Pricer({ pricesFile: a2 }).priceVersion).toBe(va);
    expect(new Pricer().priceVersion).toBe('genai-prices@0.1.8');
  });

  it('cost results carry it', () => {
    const p = new Pricer({
      pricesFile: tempFile('v-c.json', '{"providers":{"groq":{"models":{"x":{"output_mtok":1}}}}}'),
    });
    const r = p.cost({ provider: 'groq', model: 'x', usage: usage({ inputTokens: 10, outputTokens: 10 }), time: NOON });
    expect(r.priceVersion).toBe(p.priceVersion);
    // No input price given: input tokens cost nothing; 10 × 1 = 10 → $0.00001
    expect(r.cost).toBe('0.00001000');
    // Unpriced results carry it too
    expect(
      p.cost({ provider: 'groq', model: 'y', usage: usage({ inputTokens: 1, outputTokens: 1 }), time: NOON })
        .priceVersion,
    ).toBe(p.priceVersion);
  });
});

describe('Pricer.fromEnv', () => {
  it('reads METER_PRICES_FILE', () => {
    const file = tempFile(
      'env.yaml',
      'providers:\n  cohere:\n    models:\n      my-command: { input_mtok: "1", output_mtok: "2" }\n',
    );
    const p = Pricer.fromEnv({ METER_PRICES_FILE: file });
    // 1000×1 + 1000×2 = 3000 → $0.003
    expect(
      p.cost({
        provider: 'cohere',
        model: 'my-command',
        usage: usage({ inputTokens: 1000, outputTokens: 1000 }),
        time: NOON,
      }).cost,
    ).toBe('0.00300000');
    expect(Pricer.fromEnv({}).priceVersion).toBe('genai-prices@0.1.8');
    expect(Pricer.fromEnv({ METER_PRICES_FILE: '' }).priceVersion).toBe('genai-prices@0.1.8');
  });
});
