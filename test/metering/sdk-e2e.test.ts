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
import { adapters, type SdkAdapter } from '../proxy/sdk-adapters.js';
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

describeEachBackend('an official SDK call through the daemon', (backend) => {
  let daemon: Daemon;
  let setup!: MeteringSetup;
  let key: string;

  beforeAll(async () => {
    const upstreams: Record<string, string> = {};
    for (const a of adapters) {
      const fake = await startFakeUpstream();
      fake.respond(async (req, res, seen) => {
        const s = isStream(req, seen.body) ? a.stream : a.chat;
        const pieces = s.contentType === 'application/json' ? [s.body]
          : s.contentType === 'application/stream+json' ? s.body.split(/(?<=\n)/) : sseEvents(s.body);
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
         cost::text AS cost, unpriced, price_version, tags, time
       FROM usage_events WHERE provider = $1 ORDER BY time DESC, event_id DESC LIMIT 1`, [slug]);
    return row!;
  }

  const cases = adapters.flatMap((a) => [false, true].map((stream) => ({ slug: a.slug, a, stream })));
  it.each(cases)('$slug stream=$stream: one event with the provider\'s tokens and the exact cost', async ({ a, stream }: { a: SdkAdapter; stream: boolean }) => {
    const scenario = stream ? a.stream : a.chat;
    expect(await a.call(daemon.url, key, stream)).toBe(scenario.text);
    const f = fixtureOf(scenario.body);
    const usage = f.expected.usage as unknown as Usage;
    const event = await lastEvent(a.slug);
    expect(event).toMatchObject({
      provider: a.slug, status: 200, stream, usage_source: 'provider',
      inputTokens: usage.inputTokens, outputTokens: usage.outputTokens, cachedInputTokens: usage.cachedInputTokens,
      cacheWriteTokens: usage.cacheWriteTokens, reasoningTokens: usage.reasoningTokens,
      tags: { team: 'search', env: 'test', feature: 'chat', tenant: 't-1' },
    });
    // the model the provider reports; Cohere v1 reports none: then the one the SDK asked for
    if (f.expected.model && scenario.body.includes(f.expected.model)) expect(event.model).toBe(f.expected.model);
    else expect(event.model).toBe('command-r');
    const priced = pricer.cost({ provider: a.slug, model: event.model as string, usage, time: new Date(event.time as string) });
    expect(event.cost).toBe(priced.cost);
    expect(event.unpriced).toBe(priced.unpriced);
    expect(event.price_version).toBe(pricer.priceVersion);
  }, 20_000);
});
