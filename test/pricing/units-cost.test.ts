/**
 * Every billed unit at its own price: each fixture's usage, as its provider's extractor reads it,
 * priced exactly and worked out by hand from the catalogue's prices (genai-prices 0.1.8); and
 * the same split of usage into units as the catalogue's own calculation, within its float error.
 */
import { describe, expect, it } from 'vitest';
import { calcPrice } from '@pydantic/genai-prices';
import { CATALOGUE_PROVIDER_ID, Pricer } from '../../src/pricing/index.js';
import type { ProviderSlug, Usage } from '../../src/providers/types.js';
import { loadFixtures, runStream } from '../providers/helpers.js';
import { tempFile } from './helpers.js';

const fixtures = loadFixtures();
const AT = new Date('2026-11-24T12:00:00Z');

function fixtureUsage(id: string): { slug: ProviderSlug; model: string; usage: Usage } {
  const f = fixtures.find((x) => `${x.slug}/${x.file}` === id);
  if (!f) throw new Error(`no fixture ${id}`);
  const r =
    f.kind === 'json'
      ? f.provider.usageFromJson(JSON.parse(f.bytes.toString('utf8')), f.expected.request)
      : runStream(f.provider, f.expected.request, f.kind === 'ndjson' ? 'ndjson' : 'sse', [f.bytes]).acc.result();
  return { slug: f.slug as ProviderSlug, model: r.model!, usage: r.usage! };
}

const pricer = new Pricer();
const costOf = (id: string, p = pricer) => {
  const { slug, model, usage } = fixtureUsage(id);
  return p.cost({ provider: slug, model, usage, time: AT });
};

describe('every billed unit at its price, exactly', () => {
  it.each([
    // claude-sonnet-4-5 $3 in / $15 out, web search $10 per 1000: 6039×3 + 931×15 = 32082 µ$ + 1 search $0.01.
    // The web fetch has no per-call price (its tokens are billed).
    ['anthropic/message-web-search.json', '0.04208200', undefined],
    // Priority is billed through a commitment: standard price. 10682×3 + 510×15 = 39696 µ$ + 2 searches $0.02.
    ['anthropic/stream-web-search.sse', '0.05969600', undefined],
    // claude-haiku-4-5 $1 / $0.10 read / $5, batch half price: (10×1 + 2048×0.1 + 12×5)/2 = 137.4 µ$.
    ['anthropic/message-batch.json', '0.00013740', '0.5'],
    // gpt-5 $1.25 / $10 at flex (half), 2 searches at the full $0.01:
    // (9215×1.25 + 812×10)/2 = 9819.375 µ$ + 20000 µ$ = 0.029819375 → half-even at the 8th: …38.
    ['openai/responses-web-search.json', '0.02981938', '0.5'],
    // gpt-4.1 $2 / $0.50 cached / $8 at priority (1.75×: $3.50 / $0.875 / $14):
    // (6388×2 + 1024×0.5 + 64×8) × 1.75 = 13800 × 1.75 = 24150 µ$ + 1 search $0.01.
    ['openai/responses-web-search-stream.sse', '0.03415000', '1.75'],
    // gpt-4.1 $2 / $0.50 cached / $8, file search $2.50 per 1000 calls (storage_searches), default tier:
    // 10432×2 + 2048×0.5 + 356×8 = 20864 + 1024 + 2848 = 24736 µ$ + 2 file searches 5000 µ$.
    ['openai/responses-file-search.json', '0.02973600', undefined],
    // gpt-5-mini $0.25 / $0.025 cached / $2: 3058×0.25 + 1152×0.025 + 498×2 = 764.5 + 28.8 + 996
    // = 1789.3 µ$ + 1 file search 2500 µ$.
    ['openai/responses-file-search-stream.sse', '0.00428930', undefined],
    // gpt-audio $2.50 text in, $32 audio in, $10 text out, $64 audio out:
    // 32×2.5 + 1140×32 + 16×10 + 382×64 = 80 + 36480 + 160 + 24448 = 61168 µ$.
    ['openai/chat-audio.json', '0.06116800', undefined],
    // gpt-audio-mini $0.60 / $2.40 text, $20 audio out: 23×0.6 + 9×2.4 + 48×20 = 13.8 + 21.6 + 960 = 995.4 µ$.
    ['openai/chat-stream-audio.sse', '0.00099540', undefined],
    // gpt-image-1.5 $5 text in, $8 image in, $32 image out: 129×5 + 194×8 + 1056×32 = 645 + 1552 + 33792 µ$.
    ['openai/images.json', '0.03598900', undefined],
    // gemini-2.5-flash $0.30 in, $0.03 cache read, $1 audio in, $0.10 cached audio, $2.50 out; image
    // tokens have no price of their own (billed as input); flex halves it:
    // cached audio 3200×0.1 = 320; other audio 320×1 = 320; other input (4563 − 3200 − 320)×0.3 = 312.9;
    // output 114×2.5 = 285 → 1237.9 µ$ / 2 = 618.95 µ$.
    ['gemini/generate-multimodal.json', '0.00061895', '0.5'],
    // gemini-2.5-flash-image $0.30 in, $2.50 text out, $30 image out: 12×0.3 + 7×2.5 + 1290×30 = 38721.1 µ$.
    ['gemini/generate-image.json', '0.03872110', undefined],
    // gemini-2.5-flash, grounding has no catalogue price: 322×0.3 + 127×2.5 = 414.1 µ$.
    ['gemini/stream-grounding.sse', '0.00041410', undefined],
    // grok-4 $3 / $0.75 cached / $15, no image price: 392×3 + 640×0.75 + 278×15 = 5826 µ$,
    // which is also xAI's own figure (58260000 ticks of 1e-10 USD).
    ['xai/chat-image.json', '0.00582600', undefined],
  ])('%s costs %s', (id, cost, tier) => {
    const r = costOf(id);
    expect(r.cost).toBe(cost);
    expect(r.unpriced).toBe(false);
    expect(r.tierMultiplier).toBe(tier);
  });

  it('service tiers: priority per model, standard for a model without a priority price', () => {
    const u = (serviceTier: string) => ({
      inputTokens: 1000,
      outputTokens: 100,
      cachedInputTokens: 0,
      cacheWriteTokens: 0,
      cacheWrite1hTokens: 0,
      reasoningTokens: 0,
      serviceTier,
    });
    // gpt-5-mini $0.25 / $2 at priority 1.8×: (1000×0.25 + 100×2) × 1.8 = 810 µ$
    expect(pricer.cost({ provider: 'openai', model: 'gpt-5-mini', usage: u('priority'), time: AT })).toMatchObject({
      cost: '0.00081000',
      tierMultiplier: '1.8',
    });
    // gpt-4o-mini at priority 5/3: (1000×0.15 + 100×0.6) × 5/3 = 350 µ$ exactly
    expect(pricer.cost({ provider: 'openai', model: 'gpt-4o-mini', usage: u('priority'), time: AT })).toMatchObject({
      cost: '0.00035000',
      tierMultiplier: '1.66666666…',
    });
    // gpt-5-nano has no priority price: standard, 1000×0.05 + 100×0.4 = 90 µ$
    const nano = pricer.cost({ provider: 'openai', model: 'gpt-5-nano', usage: u('priority'), time: AT });
    expect(nano.cost).toBe('0.00009000');
    expect(nano.tierMultiplier).toBeUndefined();
    // OpenAI batch (Batch API results): half the standard price, cached input too.
    // gpt-4o-mini $0.15 / $0.075 cached / $0.60: (600×0.15 + 400×0.075 + 100×0.6) / 2 = (90 + 30 + 60) / 2 = 90 µ$
    expect(
      pricer.cost({
        provider: 'openai',
        model: 'gpt-4o-mini',
        usage: { ...u('batch'), cachedInputTokens: 400 },
        time: AT,
      }),
    ).toMatchObject({ cost: '0.00009000', tierMultiplier: '0.5' });
    // Gemini priority 1.8×: gemini-2.5-flash (1000×0.3 + 100×2.5) × 1.8 = 990 µ$; Groq flex is the on-demand price.
    expect(pricer.cost({ provider: 'gemini', model: 'gemini-2.5-flash', usage: u('priority'), time: AT }).cost).toBe(
      '0.00099000',
    );
    expect(pricer.cost({ provider: 'groq', model: 'llama-3.3-70b-versatile', usage: u('flex'), time: AT }).cost).toBe(
      pricer.cost({ provider: 'groq', model: 'llama-3.3-70b-versatile', usage: u('on_demand'), time: AT }).cost,
    );
  });

  it('inconsistent counts are clamped, never negative: more audio than input is all audio', () => {
    // gpt-audio: 100 prompt tokens reported, 150 of them "audio": billed as 100 audio × $32 = 3200 µ$.
    const r = pricer.cost({
      provider: 'openai',
      model: 'gpt-audio',
      time: AT,
      usage: {
        inputTokens: 100,
        outputTokens: 0,
        cachedInputTokens: 0,
        cacheWriteTokens: 0,
        cacheWrite1hTokens: 0,
        reasoningTokens: 0,
        units: { input_audio_tokens: 150 },
      },
    });
    expect(r.cost).toBe('0.00320000');
  });

  it('a prices file adds a grounding price to the catalogue model (its token prices stay)', () => {
    const p = new Pricer({
      pricesFile: tempFile(
        'grounding.yaml',
        'providers:\n  gemini:\n    models:\n      gemini-2.5-flash:\n        web_searches_kcount: 35\n',
      ),
    });
    // 414.1 µ$ of tokens + 2 queries × $35/1000
    expect(costOf('gemini/stream-grounding.sse', p).cost).toBe('0.07041410');
  });

  it('xAI server-side searches are billed units; the catalogue has no price for them, a prices file adds it', () => {
    // grok-4.6 $2 / $0.50 cached / $6: 3186×2 + 1024×0.5 + 733×6 = 11282 µ$; 2 web searches and 1 X search unpriced.
    expect(costOf('xai/responses-tools.json').cost).toBe('0.01128200');
    // grok-4.3 $1.25 / $0.20 cached / $2.50: 5024×1.25 + 4096×0.2 + 1210×2.5 = 10124.2 µ$
    expect(costOf('xai/responses-x-search-stream.sse').cost).toBe('0.01012420');
    const p = new Pricer({
      pricesFile: tempFile(
        'xai-tools.yaml',
        'providers:\n  xai:\n    models:\n      "grok-*":\n        web_searches_kcount: 5\n        social_searches_kcount: 5\n',
      ),
    });
    // + 3 calls × $5/1000 = 26282 µ$: xAI's own figure, 262820000 ticks of 1e-10 USD
    expect(costOf('xai/responses-tools.json', p).cost).toBe('0.02628200');
    // + 2 X searches × $5/1000 = 20124.2 µ$: 201242000 ticks
    expect(costOf('xai/responses-x-search-stream.sse', p).cost).toBe('0.02012420');
  });

  it('file searches keep their per-call price at any service tier; xAI Collections Search is unpriced until a prices file adds it', () => {
    const { usage } = fixtureUsage('openai/responses-file-search.json');
    // gpt-4.1 at flex: 24736 µ$ / 2 = 12368 µ$ + 2 file searches at the full $2.50/1000 = 17368 µ$
    expect(
      pricer.cost({ provider: 'openai', model: 'gpt-4.1', usage: { ...usage, serviceTier: 'flex' }, time: AT }),
    ).toMatchObject({ cost: '0.01736800', tierMultiplier: '0.5' });
    // grok-4.3 $1.25 / $2.50: 2000×1.25 + 300×2.5 = 3250 µ$; the catalogue has no xAI file search price
    expect(costOf('xai/responses-collections-search.json')).toMatchObject({ cost: '0.00325000', unpriced: false });
    const p = new Pricer({
      pricesFile: tempFile(
        'xai-collections.yaml',
        'providers:\n  xai:\n    models:\n      "grok-*":\n        storage_searches_kcount: 2.5\n',
      ),
    });
    // + 1 × $2.50/1000 = 5750 µ$: xAI's own figure, 57500000 ticks of 1e-10 USD
    expect(costOf('xai/responses-collections-search.json', p).cost).toBe('0.00575000');
  });

  it('Cohere rerank: no table prices it (flagged unpriced); a prices file entry of a search price alone does', () => {
    expect(costOf('cohere/rerank-v2.json')).toMatchObject({ cost: '0.00000000', unpriced: true });
    const p = new Pricer({
      pricesFile: tempFile(
        'rerank.yaml',
        [
          'providers:',
          '  cohere:',
          '    models:',
          '      rerank-v3.5:',
          '        rerank_searches_kcount: 2',
          '      "rerank-english-*":',
          '        rerank_searches_kcount: 2',
          '        discount_pct: 25',
          '',
        ].join('\n'),
      ),
    });
    // 1 search × $2/1000
    expect(costOf('cohere/rerank-v2.json', p)).toMatchObject({
      cost: '0.00200000',
      unpriced: false,
      source: 'override',
      matchedModel: 'rerank-v3.5',
    });
    // 2 searches × $2/1000, 25% off: $0.003
    expect(costOf('cohere/rerank-v1.json', p)).toMatchObject({ cost: '0.00300000', unpriced: false });
    // a web search price alone cannot price a model the catalogue does not know: a typo stays an error
    expect(
      () =>
        new Pricer({
          pricesFile: tempFile(
            'typo.yaml',
            'providers:\n  cohere:\n    models:\n      rerank-v9:\n        web_searches_kcount: 1\n',
          ),
        }),
    ).toThrow(/has no token prices for cohere model "rerank-v9"/);
  });

  it('agrees with the catalogue’s own split of the same units (float totals, within 1e-8)', () => {
    const ids = [
      'anthropic/message-web-search.json',
      'openai/chat-audio.json',
      'openai/chat-stream-audio.sse',
      'openai/images.json',
      'gemini/generate-image.json',
      'xai/chat-image.json',
      'xai/responses-tools.json',
      'openai/responses-file-search.json',
      'openai/responses-file-search-stream.sse',
    ];
    for (const id of ids) {
      const { slug, model, usage } = fixtureUsage(id);
      const theirs = calcPrice(
        {
          input_tokens: usage.inputTokens,
          output_tokens: usage.outputTokens,
          cache_read_tokens: usage.cachedInputTokens,
          cache_write_tokens: usage.cacheWriteTokens,
          ...usage.units,
        },
        model,
        { providerId: CATALOGUE_PROVIDER_ID[slug], timestamp: AT },
      )!;
      expect(Math.abs(Number(costOf(id).cost) - theirs.total_price), id).toBeLessThanOrEqual(0.5e-8 + 1e-12);
    }
  });
});
