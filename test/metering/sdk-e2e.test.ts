import type { IncomingMessage } from 'node:http';
import { beforeAll, expect, it } from 'vitest';
import { createAccount } from '../../src/auth/accounts.js';
import { createKey } from '../../src/auth/keys.js';
import type { MeteringSetup } from '../../src/metering/index.js';
import type { ProviderSlug, Usage } from '../../src/providers/types.js';
import type { Daemon } from '../../src/server/daemon.js';
import { startShippedDaemon } from '../helpers/shipped-daemon.js';
import { describeEachBackend } from '../helpers/stores.js';
import { sseEvents, startFakeUpstream, writeInPieces } from '../helpers/upstreams.js';
import { CohereClientV2 } from 'cohere-ai';
import OpenAI from 'openai';
import { adapters, fixture, PROVIDER_KEY, type SdkAdapter } from '../proxy/sdk-adapters.js';
import { loadFixtures, pricer } from './fixtures.js';

/**
 * End to end: each provider's official SDK → the daemon as shipped (src/server/components.ts)
 * → a fake provider answering with a fixture; the usage event in the store has the fixture's
 * tokens and the exact cost, on both back-ends.
 */
const fixtures = loadFixtures();
const fixtureOf = (body: string) => fixtures.find((f) => f.bytes.toString('utf8') === body)!;

function isStream(req: IncomingMessage, body: Buffer): boolean {
  if (req.url!.includes('streamGenerateContent')) return true;
  try {
    return (JSON.parse(body.toString()) as { stream?: boolean }).stream === true;
  } catch {
    return false;
  }
}

/** Calls other than chat, answered with their fixture by provider and upstream path. */
const OTHER_CALLS: Record<string, { json: string; sse?: string }> = {
  'cohere /v2/rerank': { json: 'cohere/rerank-v2.json' },
  'xai /v1/responses': { json: 'xai/responses-tools.json', sse: 'xai/responses-x-search-stream.sse' },
  'openai /v1/responses': { json: 'openai/responses-file-search.json', sse: 'openai/responses-file-search-stream.sse' },
};

describeEachBackend('an official SDK call through the daemon', (backend) => {
  let daemon: Daemon;
  let setup!: MeteringSetup;
  let key: string;

  beforeAll(async () => {
    const upstreams: Record<string, string> = {};
    for (const a of adapters) {
      const fake = await startFakeUpstream();
      fake.respond(async (req, res, seen) => {
        const other = OTHER_CALLS[`${a.slug} ${req.url}`];
        if (other) {
          const sse = isStream(req, seen.body) ? other.sse : undefined;
          return writeInPieces(
            res,
            200,
            sse ? 'text/event-stream' : 'application/json',
            sse ? sseEvents(fixture(sse)) : [fixture(other.json)],
          );
        }
        const s = isStream(req, seen.body) ? a.stream : a.chat;
        const pieces =
          s.contentType === 'application/json'
            ? [s.body]
            : s.contentType === 'application/stream+json'
              ? s.body.split(/(?<=\n)/)
              : sseEvents(s.body);
        await writeInPieces(res, 200, s.contentType, pieces);
      });
      upstreams[`METER_UPSTREAM_${a.slug.toUpperCase()}`] = `${fake.origin}${a.basePath}`;
    }
    ({ daemon, setup } = await startShippedDaemon(await backend.config(), upstreams));
    await createAccount(daemon.store, 'sdk-e2e', 'pro');
    key = (await createKey(daemon.store, 'sdk-e2e', 'e2e')).key;
    return () => daemon.close();
  });

  async function lastEvent(slug: ProviderSlug) {
    await setup.writer.drain();
    const [row] = await daemon.store.query<Record<string, unknown>>(
      `SELECT event_id, provider, model, status, stream, usage_source, input_tokens::int AS "inputTokens",
         output_tokens::int AS "outputTokens", cached_input_tokens::int AS "cachedInputTokens",
         cache_write_tokens::int AS "cacheWriteTokens", reasoning_tokens::int AS "reasoningTokens",
         cost::text AS cost, unpriced, price_version, tags, units, time
       FROM usage_events WHERE provider = $1 ORDER BY time DESC, event_id DESC LIMIT 1`,
      [slug],
    );
    return row!;
  }

  const cases = adapters.flatMap((a) => [false, true].map((stream) => ({ slug: a.slug, a, stream })));
  it.each(cases)(
    "$slug stream=$stream: one event with the provider's tokens and the exact cost",
    async ({ a, stream }: { a: SdkAdapter; stream: boolean }) => {
      const scenario = stream ? a.stream : a.chat;
      expect(await a.call(daemon.url, key, stream)).toBe(scenario.text);
      const f = fixtureOf(scenario.body);
      const usage = f.expected.usage as unknown as Usage;
      const event = await lastEvent(a.slug);
      expect(event).toMatchObject({
        provider: a.slug,
        status: 200,
        stream,
        usage_source: 'provider',
        inputTokens: usage.inputTokens,
        outputTokens: usage.outputTokens,
        cachedInputTokens: usage.cachedInputTokens,
        cacheWriteTokens: usage.cacheWriteTokens,
        reasoningTokens: usage.reasoningTokens,
        tags: { team: 'search', env: 'test', feature: 'chat', tenant: 't-1' },
      });
      // the model the provider reports; Cohere v1 reports none: then the one the SDK asked for
      if (f.expected.model && scenario.body.includes(f.expected.model)) expect(event.model).toBe(f.expected.model);
      else expect(event.model).toBe('command-r');
      const priced = pricer.cost({
        provider: a.slug,
        model: event.model as string,
        usage,
        time: new Date(event.time as string),
      });
      expect(event.cost).toBe(priced.cost);
      expect(event.unpriced).toBe(priced.unpriced);
      expect(event.price_version).toBe(pricer.priceVersion);
    },
    20_000,
  );

  it('billed units beyond tokens reach the event: Cohere rerank searches, xAI web and X searches (JSON and stream)', async () => {
    const cohere = new CohereClientV2({
      token: PROVIDER_KEY,
      baseUrl: `${daemon.url}/proxy/cohere`,
      headers: { 'X-Meter-Key': key },
      maxRetries: 0,
    });
    const ranked = await cohere.rerank({
      model: 'rerank-v3.5',
      query: 'What is the capital of the United States?',
      documents: ['Carson City', 'Saipan', 'Washington, D.C.'],
      topN: 3,
    });
    expect(ranked.meta?.billedUnits?.searchUnits).toBe(1);
    // no table prices rerank-v3.5: recorded with its searches and flagged unpriced
    expect(await lastEvent('cohere')).toMatchObject({
      model: 'rerank-v3.5',
      usage_source: 'provider',
      units: { rerank_searches: 1 },
      unpriced: true,
      cost: '0.00000000',
    });

    const xai = new OpenAI({
      apiKey: key,
      baseURL: `${daemon.url}/proxy/xai`,
      defaultHeaders: { 'X-Provider-Authorization': `Bearer ${PROVIDER_KEY}` },
      maxRetries: 0,
    });
    const answer = await xai.responses.create({
      model: 'grok-4.6',
      input: 'When is the next Starship flight?',
      tools: [{ type: 'web_search' }],
    });
    expect(answer.output_text).toContain('Starship');
    // tokens at the catalogue price (see test/pricing/units-cost.test.ts); the searches have none there
    expect(await lastEvent('xai')).toMatchObject({
      model: 'grok-4.6',
      stream: false,
      units: { web_searches: 2, social_searches: 1 },
      unpriced: false,
      cost: '0.01128200',
    });

    let text = '';
    const stream = await xai.responses.create({
      model: 'grok-4.3',
      input: 'What did xAI post this week?',
      stream: true,
    });
    for await (const e of stream) if (e.type === 'response.output_text.delta') text += e.delta;
    expect(text).toBe('xAI posted about Grok 4.3.');
    expect(await lastEvent('xai')).toMatchObject({
      model: 'grok-4.3',
      stream: true,
      usage_source: 'provider',
      units: { social_searches: 2 },
      cost: '0.01012420',
    });
  }, 20_000);

  it('OpenAI file search calls reach the event as storage_searches, priced at the catalogue price (JSON and stream)', async () => {
    const openai = new OpenAI({
      apiKey: key,
      baseURL: `${daemon.url}/proxy/openai`,
      defaultHeaders: { 'X-Provider-Authorization': `Bearer ${PROVIDER_KEY}` },
      maxRetries: 0,
    });
    const tools = [{ type: 'file_search' as const, vector_store_ids: ['vs_1234567890'] }];
    const answer = await openai.responses.create({
      model: 'gpt-4.1',
      input: 'What is deep research by OpenAI?',
      tools,
    });
    expect(answer.output.filter((item) => item.type === 'file_search_call')).toHaveLength(2);
    // hand-worked in test/pricing/units-cost.test.ts: 24736 µ$ of tokens + 2 × $2.50/1000
    expect(await lastEvent('openai')).toMatchObject({
      model: 'gpt-4.1-2025-04-14',
      stream: false,
      units: { storage_searches: 2 },
      unpriced: false,
      cost: '0.02973600',
    });

    let text = '';
    const stream = await openai.responses.create({
      model: 'gpt-5-mini',
      input: 'Can I return an opened item?',
      tools,
      stream: true,
    });
    for await (const e of stream) if (e.type === 'response.output_text.delta') text += e.delta;
    expect(text).toBe('Opened items can be returned within 30 days with a receipt.');
    expect(await lastEvent('openai')).toMatchObject({
      model: 'gpt-5-mini-2025-08-07',
      stream: true,
      usage_source: 'provider',
      units: { storage_searches: 1 },
      cost: '0.00428930',
    });
  }, 20_000);
});
