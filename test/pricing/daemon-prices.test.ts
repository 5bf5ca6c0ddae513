/**
 * The daemon as shipped with METER_PRICES_REMOTE: the price data a loopback server serves is in
 * force for proxied calls, and the event's price_version names it; billed units and the service
 * tier reach the event. PostgreSQL only (the wiring is the same on every back-end).
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { beforeAll, describe, expect, it } from 'vitest';
import { waitForUpdate, type Provider } from '@pydantic/genai-prices';
import { createAccount } from '../../src/auth/accounts.js';
import { createKey } from '../../src/auth/keys.js';
import type { MeteringSetup } from '../../src/metering/index.js';
import { activePriceTable } from '../../src/pricing/price-data.js';
import type { Daemon } from '../../src/server/daemon.js';
import { startShippedDaemon } from '../helpers/shipped-daemon.js';
import { atFileEnd } from '../helpers/cleanup.js';
import { backends, postgresUrl } from '../helpers/stores.js';
import { startFakeUpstream } from '../helpers/upstreams.js';

const MODEL = 'acme/brand-new-70b';

const backend = backends.find((b) => b.name === 'postgres')!;

describe.skipIf(!postgresUrl)('METER_PRICES_REMOTE in the daemon [postgres]', () => {
  let daemon: Daemon;
  let setup!: MeteringSetup;
  let key: string;

  beforeAll(async () => {
    const providers = JSON.parse(JSON.stringify(await waitForUpdate())) as Provider[];
    providers
      .find((p) => p.id === 'together')!
      .models.push({ id: MODEL, match: { equals: MODEL }, prices: { input_mtok: 0.7, output_mtok: 0.9 } });
    const data = JSON.stringify(providers);
    const prices = createServer((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(data));
    await new Promise<void>((r) => prices.listen(0, '127.0.0.1', r));
    atFileEnd(
      () =>
        new Promise<void>((r) => {
          prices.closeAllConnections();
          prices.close(() => r());
        }),
    );

    const together = await startFakeUpstream();
    together.respond((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          id: 'o1',
          object: 'chat.completion',
          created: 1763980000,
          model: MODEL,
          service_tier: 'flex',
          choices: [{ index: 0, message: { role: 'assistant', content: 'hi' }, finish_reason: 'stop' }],
          usage: {
            prompt_tokens: 1000,
            completion_tokens: 1000,
            total_tokens: 2000,
            prompt_tokens_details: { audio_tokens: 10 },
          },
        }),
      );
    });
    atFileEnd(() => together.close());
    ({ daemon, setup } = await startShippedDaemon(await backend.config(), {
      METER_UPSTREAM_TOGETHER: `${together.origin}/v1`,
      METER_PRICES_REMOTE: `http://127.0.0.1:${(prices.address() as AddressInfo).port}/data.json`,
    }));
    atFileEnd(() => daemon.close());
    await createAccount(daemon.store, 'prices', 'pro');
    key = (await createKey(daemon.store, 'prices', 'p')).key;
  }, 120_000);

  it('prices a model only the fetched data knows, and names that table on the event', async () => {
    await expect.poll(() => activePriceTable().origin, { timeout: 10_000 }).toBe('downloaded');
    const res = await fetch(`${daemon.url}/proxy/together/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(res.status).toBe(200);
    const id = res.headers.get('x-meter-request-id');
    await res.text();
    await expect
      .poll(
        async () => {
          await setup.writer.drain();
          return (await daemon.store.query('SELECT 1 FROM usage_events WHERE event_id = $1', [id])).length;
        },
        { timeout: 10_000 },
      )
      .toBe(1);
    const [event] = await daemon.store.query(
      'SELECT cost::text AS cost, unpriced, price_version, service_tier, units FROM usage_events WHERE event_id = $1',
      [id],
    );
    // 1000 × 0.7 + 1000 × 0.9 = 1600 µ$ (Together has no tier prices: flex is stored, not priced)
    expect(event).toEqual({
      cost: '0.00160000',
      unpriced: false,
      price_version: activePriceTable().version,
      service_tier: 'flex',
      units: { input_audio_tokens: 10 },
    });
    expect(activePriceTable().version).toMatch(/^genai-prices-data@/);
  });
});
