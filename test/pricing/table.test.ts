import { describe, it, expect } from 'vitest';
import { Pricer, formatPriceTable } from '../../src/pricing/index.js';
import { tempFile } from './helpers.js';

describe('formatPriceTable (meter pricing show)', () => {
  const at = new Date('2025-09-01T12:00:00Z');

  it('lists every token class with long-context tiers, from the catalogue', () => {
    const { text, json } = formatPriceTable(new Pricer(), 'anthropic', 'claude-sonnet-4-5-20250929', at);
    // claude-sonnet-4-5: $3 / $0.30 / $3.75 / $6 / $15, doubled (output × 1.5) above 200000 input tokens.
    expect(json).toMatchObject({
      provider: 'anthropic',
      model: 'claude-sonnet-4-5-20250929',
      priced: true,
      matched_model: 'claude-sonnet-4-5',
      source: 'catalogue',
      price_version: 'genai-prices@0.1.8',
      at: '2025-09-01T12:00:00.000Z',
    });
    expect(json.prices).toEqual([
      { class: 'input', usd_per_mtok: '3', tiers: [{ above_input_tokens: 200000, usd_per_mtok: '6' }] },
      { class: 'cache_read', usd_per_mtok: '0.3', tiers: [{ above_input_tokens: 200000, usd_per_mtok: '0.6' }] },
      { class: 'cache_write', usd_per_mtok: '3.75', tiers: [{ above_input_tokens: 200000, usd_per_mtok: '7.5' }] },
      { class: 'cache_write_1h', usd_per_mtok: '6', tiers: [{ above_input_tokens: 200000, usd_per_mtok: '12' }] },
      { class: 'output', usd_per_mtok: '15', tiers: [{ above_input_tokens: 200000, usd_per_mtok: '22.5' }] },
      // web search: $10 per thousand calls, never re-priced by the long-context tier
      { class: 'web_search', usd_per_mtok: '10', per_calls: 1000, tiers: [] },
    ]);
    expect(text).toMatch(/cache write \(1h\)\s+6\s+12\n/);
    expect(text).toMatch(/> 200000 input tokens/);
    expect(JSON.parse(JSON.stringify(json))).toEqual(json);
  });

  it('says which dated or time-of-day price applies', () => {
    const { json, text } = formatPriceTable(
      new Pricer(),
      'deepseek',
      'deepseek-chat',
      new Date('2025-09-01T20:00:00Z'),
    );
    // 20:00 UTC is outside 00:30–16:30: the discount prices $0.135 / $0.035 / $0.55.
    expect(json.applies).toBe('default');
    expect(json.other_periods).toEqual(['00:30:00Z–16:30:00Z daily']);
    expect(json.prices.find((p) => p.class === 'input')?.usd_per_mtok).toBe('0.135');
    // DeepSeek has no cache-write price: writes would be billed as input.
    expect(json.prices.find((p) => p.class === 'cache_write')).toMatchObject({
      usd_per_mtok: '0.135',
      billed_as: 'input',
    });
    expect(text).toContain('applies: default; other periods: 00:30:00Z–16:30:00Z daily');
  });

  it('shows discounted prices from a prices file', () => {
    const pricer = new Pricer({
      pricesFile: tempFile('table.yaml', 'providers:\n  openai:\n    discount_pct: "12.5"\n'),
    });
    const { json, text } = formatPriceTable(pricer, 'openai', 'gpt-4o', at);
    // gpt-4o $2.50 / $1.25 / $10, web search $10 and file search $2.50 per 1K calls, 12.5% off:
    // 2.1875 / 1.09375 / 8.75 / 8.75 / 2.1875
    expect(json.discount_pct).toBe('12.5');
    expect(json.prices.map((p) => [p.class, p.usd_per_mtok])).toEqual([
      ['input', '2.1875'],
      ['cache_read', '1.09375'],
      ['cache_write', '2.1875'],
      ['cache_write_1h', '2.1875'],
      ['output', '8.75'],
      ['web_search', '8.75'],
      ['storage_search', '2.1875'],
    ]);
    expect(text).toMatch(/file search \(per 1K calls\)\s+2\.1875\n/);
    expect(json.price_version).toBe(pricer.priceVersion);
    expect(text).toContain('discount: 12.5%');
  });

  it('a rerank model priced by the prices file shows its search price only', () => {
    const pricer = new Pricer({
      pricesFile: tempFile(
        'rerank-table.yaml',
        'providers:\n  cohere:\n    models:\n      rerank-v3.5:\n        rerank_searches_kcount: 2\n',
      ),
    });
    const { json, text } = formatPriceTable(pricer, 'cohere', 'rerank-v3.5', at);
    expect(json).toMatchObject({ priced: true, matched_model: 'rerank-v3.5', source: 'override' });
    expect(json.prices).toEqual([{ class: 'rerank_search', usd_per_mtok: '2', per_calls: 1000, tiers: [] }]);
    expect(text).toMatch(/rerank search \(per 1K searches\)\s+2\n/);
  });

  it('unknown model', () => {
    const { json, text } = formatPriceTable(new Pricer(), 'cohere', 'no-such-model', at);
    expect(json).toMatchObject({ priced: false, matched_model: null, prices: [] });
    expect(text).toContain('no price');
  });
});
