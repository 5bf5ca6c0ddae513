import { describe, it, expect } from 'vitest';
import { Pricer, PricesFileError, parseOverrides } from '../../src/pricing/index.js';
import { usage, tempFile, T } from './helpers.js';

/** The error a prices file produces when the Pricer is built from it. */
function errorOf(name: string, content: string): PricesFileError {
  const file = tempFile(name, content);
  try {
    new Pricer({ pricesFile: file });
  } catch (err) {
    expect(err).toBeInstanceOf(PricesFileError);
    const e = err as PricesFileError;
    // Every message names the variable and the file.
    expect(e.message).toContain('METER_PRICES_FILE');
    expect(e.message).toContain(file);
    return e;
  }
  throw new Error(`expected ${name} to be rejected`);
}

describe('malformed prices files', () => {
  it('JSON syntax error', () => {
    const e = errorOf('bad.json', '{ "providers": { "openai": } }');
    expect(e.message).toMatch(/not valid JSON/);
  });

  it('YAML syntax error, with the line', () => {
    const e = errorOf('bad.yaml', 'providers:\n  openai:\n    models: {\n');
    expect(e.message).toMatch(/not valid YAML/);
    expect(e.message).toMatch(/line \d+/);
  });

  it('duplicate YAML keys', () => {
    const e = errorOf('dup.yaml', 'providers:\n  openai: {}\n  openai: {}\n');
    expect(e.message).toMatch(/not valid YAML/);
  });

  it('empty file', () => {
    expect(errorOf('empty.yaml', '\n').message).toMatch(/empty.*providers/);
  });

  it('missing file', () => {
    expect(() => new Pricer({ pricesFile: 'no/such/prices.yaml' })).toThrow(
      /METER_PRICES_FILE no\/such\/prices\.yaml: cannot read the file \(ENOENT\)/,
    );
  });

  it('no providers key', () => {
    const e = errorOf('noprov.yaml', 'openai:\n  models: {}\n');
    expect(e.message).toMatch(/\(top level\): unknown key "openai" in the top level; allowed: version, providers/);
    expect(e.message).toMatch(/providers: expected providers/);
  });

  it('unknown provider: lists the slugs', () => {
    const e = errorOf('slug.yaml', 'providers:\n  azure:\n    models: {}\n');
    expect(e.message).toContain(
      'providers: unknown key "azure" in providers; allowed: openai, anthropic, groq, gemini, mistral, together, cohere, deepseek, xai',
    );
  });

  it('price that is not a decimal: path and what is allowed', () => {
    const e = errorOf(
      'price.yaml',
      'providers:\n  openai:\n    models:\n      "ft:gpt-4o:acme":\n        input_mtok: "1,5"\n',
    );
    expect(e.message).toContain(
      'providers.openai.models["ft:gpt-4o:acme"].input_mtok: expected a non-negative decimal in USD per million tokens',
    );
    expect(e.message).toContain('got "1,5"');
  });

  it('negative price', () => {
    const e = errorOf('neg.json', '{"providers":{"groq":{"models":{"m":{"output_mtok":-1}}}}}');
    expect(e.message).toContain('providers.groq.models.m.output_mtok: expected a non-negative decimal');
    expect(e.message).toContain('got -1');
  });

  it('unknown key in a model entry: lists the allowed keys', () => {
    const e = errorOf('key.yaml', 'providers:\n  openai:\n    models:\n      m:\n        input: 1\n');
    expect(e.message).toContain(
      'providers.openai.models.m: unknown key "input" in a model entry; allowed: input_mtok, cache_read_mtok, cache_write_mtok, cache_write_1h_mtok, output_mtok, input_audio_mtok, cache_audio_read_mtok, input_image_mtok, cache_image_read_mtok, input_video_mtok, output_audio_mtok, output_image_mtok, output_video_mtok, web_searches_kcount, social_searches_kcount, storage_searches_kcount, rerank_searches_kcount, requests_kcount, tiers, discount_pct, same_as',
    );
  });

  it('discount out of range', () => {
    const e = errorOf('pct.yaml', 'providers:\n  anthropic:\n    discount_pct: 150\n');
    expect(e.message).toContain('providers.anthropic.discount_pct: expected a percentage from 0 to 100');
  });

  it('model entry without prices, same_as or discount', () => {
    const e = errorOf('none.yaml', 'providers:\n  openai:\n    models:\n      m: {}\n');
    expect(e.message).toContain('providers.openai.models.m: a model entry needs prices');
  });

  it('same_as together with prices', () => {
    const e = errorOf('both.yaml', 'providers:\n  openai:\n    models:\n      m: { same_as: gpt-4o, input_mtok: 1 }\n');
    expect(e.message).toContain('providers.openai.models.m: give either same_as or prices');
  });

  it('same_as naming a model the catalogue does not have', () => {
    const e = errorOf('alias.yaml', 'providers:\n  together:\n    models:\n      m: { same_as: meta-llama/Llama-9 }\n');
    expect(e.message).toContain(
      'providers.together.models.m.same_as: genai-prices@0.1.8 has no token prices for together model "meta-llama/Llama-9"',
    );
  });

  it('a discount for a model the catalogue does not have', () => {
    const e = errorOf('disc.yaml', 'providers:\n  openai:\n    models:\n      gpt-99: { discount_pct: 10 }\n');
    expect(e.message).toContain(
      'providers.openai.models.gpt-99.discount_pct: genai-prices@0.1.8 has no token prices for openai model "gpt-99"',
    );
  });

  it('wildcard not at the end', () => {
    const e = errorOf('star.yaml', 'providers:\n  openai:\n    models:\n      "ft:*:acme": { input_mtok: 1 }\n');
    expect(e.message).toContain(
      'providers.openai.models["ft:*:acme"]: a model name may use * only once, as its last character',
    );
  });

  it('two names that differ only in case', () => {
    const e = errorOf(
      'case.yaml',
      'providers:\n  openai:\n    models:\n      My-Model: { input_mtok: 1 }\n      my-model: { input_mtok: 2 }\n',
    );
    expect(e.message).toContain('same model as "My-Model"');
  });

  it('tiers out of order, and a tier price without a base price', () => {
    const e = errorOf(
      'tiers.yaml',
      [
        'providers:',
        '  anthropic:',
        '    models:',
        '      m:',
        '        input_mtok: 3',
        '        tiers:',
        '          - { above_input_tokens: 200000, input_mtok: 6 }',
        '          - { above_input_tokens: 100000, output_mtok: 20 }',
        '',
      ].join('\n'),
    );
    expect(e.message).toContain(
      'providers.anthropic.models.m.tiers[1].above_input_tokens: tiers must be in increasing order',
    );
    expect(e.message).toContain(
      'providers.anthropic.models.m.tiers[1].output_mtok: a tier price for output_mtok needs a base output_mtok',
    );
  });

  it('a non-integer tier threshold', () => {
    const e = errorOf(
      'thr.json',
      '{"providers":{"openai":{"models":{"m":{"input_mtok":1,"tiers":[{"above_input_tokens":"lots","input_mtok":2}]}}}}}',
    );
    expect(e.message).toContain(
      'providers.openai.models.m.tiers[0].above_input_tokens: expected a whole number of input tokens',
    );
  });

  it('reports every problem at once', () => {
    const e = errorOf(
      'many.yaml',
      'providers:\n  openai:\n    models:\n      a: { input_mtok: x }\n      b: { output_mtok: y }\n',
    );
    expect(e.problems.map((p) => p.path)).toEqual([
      'providers.openai.models.a.input_mtok',
      'providers.openai.models.b.output_mtok',
    ]);
  });

  it('parseOverrides can name a different origin', () => {
    expect(() => parseOverrides('providers: 3', 'inline.yaml', '--prices')).toThrow(
      /^--prices inline\.yaml is invalid:\n {2}providers: expected providers/,
    );
  });
});

describe('override keys and catalogue aliases', () => {
  const pricer = new Pricer({
    pricesFile: tempFile(
      'alias.yaml',
      `
providers:
  openai:
    models:
      gpt-4o: { input_mtok: 2, output_mtok: 8 }
  anthropic:
    models:
      claude-3-5-sonnet-custom: { input_mtok: 1, output_mtok: 1 }
`,
    ),
  });
  const NOON = T('2025-09-01T12:00:00Z');

  it('an override of a catalogue id also prices its dated names', () => {
    // OpenAI answers gpt-4o-2024-08-06 for gpt-4o: the override ($2 / $8) must still apply.
    // 1000×2 + 1000×8 = 10000 → $0.01 (the catalogue's $2.50 / $10 would give $0.0125)
    const r = pricer.cost({
      provider: 'openai',
      model: 'gpt-4o-2024-08-06',
      requestedModel: 'gpt-4o',
      usage: usage({ inputTokens: 1000, outputTokens: 1000 }),
      time: NOON,
    });
    expect(r).toMatchObject({ cost: '0.01000000', source: 'override', matchedModel: 'gpt-4o' });
  });

  it('a custom name that the catalogue would loosely match does not re-price the real model', () => {
    // claude-3-5-sonnet stays at the catalogue's $3 / $15: 1000×3 + 1000×15 = 18000 → $0.018
    const real = pricer.cost({
      provider: 'anthropic',
      model: 'claude-3-5-sonnet-20241022',
      usage: usage({ inputTokens: 1000, outputTokens: 1000 }),
      time: NOON,
    });
    expect(real).toMatchObject({ cost: '0.01800000', source: 'catalogue' });
    // …while the custom name gets its own $1 / $1: 2000 × 1 = 2000 → $0.002
    const custom = pricer.cost({
      provider: 'anthropic',
      model: 'claude-3-5-sonnet-custom',
      usage: usage({ inputTokens: 1000, outputTokens: 1000 }),
      time: NOON,
    });
    expect(custom).toMatchObject({ cost: '0.00200000', source: 'override' });
  });
});
