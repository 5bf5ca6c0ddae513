/**
 * Prices that stay current: price data served by a loopback server (a good file, a corrupt one,
 * one with a bad price, one that never answers), the last good copy kept in METER_DATA_DIR, the
 * bundled catalogue as the fallback, and every event's price_version naming the table in force.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { waitForUpdate, type Provider } from '@pydantic/genai-prices';
import { Pricer } from '../../src/pricing/index.js';
import { activateBundled, activePriceTable, priceDataFile } from '../../src/pricing/price-data.js';
import { PriceRefresher } from '../../src/pricing/refresh.js';
import { atFileEnd } from '../helpers/cleanup.js';
import { tempDir } from '../helpers/stores.js';
import { usage } from './helpers.js';

const AT = new Date('2026-11-24T12:00:00Z');
let bundledJson: string;
let newerJson: string;
let base: string;
/** What the loopback server answers per path; `hang` never answers. */
const routes = new Map<string, string | 'hang'>();

/** The bundled data with a newer price for deepseek-chat and a model the catalogue lacks. */
function newerData(providers: Provider[]): string {
  const copy = JSON.parse(JSON.stringify(providers)) as Provider[];
  const together = copy.find((p) => p.id === 'together')!;
  together.models.push({
    id: 'acme/brand-new-70b',
    match: { equals: 'acme/brand-new-70b' },
    prices: { input_mtok: 0.7, output_mtok: 0.9 },
  });
  return JSON.stringify(copy);
}

beforeAll(async () => {
  const providers = (await waitForUpdate())!;
  bundledJson = JSON.stringify(providers);
  newerJson = newerData(providers);
  const broken = JSON.parse(newerJson) as Provider[];
  broken.find((p) => p.id === 'openai')!.models[0]!.prices = { input_mtok: 'cheap' as unknown as number };
  routes.set('/good.json', newerJson);
  routes.set('/corrupt.json', newerJson.slice(0, 5000));
  routes.set('/bad-price.json', JSON.stringify(broken));
  routes.set('/no-anthropic.json', JSON.stringify(providers.filter((p) => p.id !== 'anthropic')));
  routes.set('/slow.json', 'hang');
  const server: Server = createServer((req, res) => {
    const body = routes.get(req.url ?? '');
    if (body === 'hang') return; // never answers
    if (body === undefined) return res.writeHead(404).end('not found');
    res.writeHead(200, { 'content-type': 'application/json' }).end(body);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  atFileEnd(
    () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  );
});

afterEach(() => activateBundled());

function logger() {
  const lines: { level: string; msg: string; fields: Record<string, unknown> }[] = [];
  const log = (level: string) => (a: unknown, b?: string) => {
    if (typeof a === 'string') lines.push({ level, msg: a, fields: {} });
    else lines.push({ level, msg: b ?? '', fields: a as Record<string, unknown> });
  };
  return { lines, logger: { info: log('info'), warn: log('warn') } };
}

const brandNew = (p: Pricer) =>
  p.cost({
    provider: 'together',
    model: 'acme/brand-new-70b',
    usage: usage({ inputTokens: 1000, outputTokens: 1000 }),
    time: AT,
  });

describe('price data refresh (METER_PRICES_REMOTE)', () => {
  it('fetches at start, validates, saves the copy and prices with it; price_version names the table', async () => {
    const dataDir = tempDir();
    const { lines, logger: log } = logger();
    const pricer = new Pricer();
    expect(pricer.priceVersion).toBe('genai-prices@0.1.8');
    expect(brandNew(pricer)).toMatchObject({ unpriced: true, priceVersion: 'genai-prices@0.1.8' });

    const r = new PriceRefresher({ dataDir, remoteUrl: `${base}/good.json`, logger: log });
    r.start();
    await r.settled();
    r.stop();
    const version = activePriceTable().version;
    expect(version).toMatch(/^genai-prices-data@[0-9a-f]{12}$/);
    expect(activePriceTable()).toMatchObject({ origin: 'downloaded', source: `${base}/good.json` });
    // The same Pricer follows the new table: 1000 × 0.7 + 1000 × 0.9 = 1600 µ$.
    expect(brandNew(pricer)).toMatchObject({ cost: '0.00160000', unpriced: false, priceVersion: version });
    expect(lines.find((l) => l.level === 'info' && l.msg.includes('updated'))?.fields).toMatchObject({
      priceVersion: version,
    });

    // A new process with the remote unreachable starts on the saved copy, and says why it kept it.
    await activateBundled();
    const again = logger();
    const r2 = new PriceRefresher({ dataDir, remoteUrl: `${base}/missing.json`, logger: again.logger });
    r2.start();
    expect(activePriceTable().version).toBe(version); // the copy is in force before the fetch ends
    await r2.settled();
    r2.stop();
    expect(activePriceTable().version).toBe(version);
    expect(again.lines.find((l) => l.level === 'warn')?.msg).toMatch(
      /HTTP 404; keeping the last good copy \(genai-prices-data@/,
    );
  });

  it.each([
    ['/corrupt.json', /not valid JSON/],
    ['/bad-price.json', /provider "openai" model "[^"]+": invalid catalogue price input_mtok/],
    ['/no-anthropic.json', /provider "anthropic" \(anthropic\) is missing/],
  ])('rejects %s, keeps the bundled catalogue and logs why', async (path, why) => {
    const dataDir = tempDir();
    const { lines, logger: log } = logger();
    const r = new PriceRefresher({ dataDir, remoteUrl: `${base}${path}`, logger: log });
    r.start();
    await r.settled();
    r.stop();
    expect(activePriceTable()).toMatchObject({ origin: 'bundled', version: 'genai-prices@0.1.8' });
    const warn = lines.find((l) => l.level === 'warn')!;
    expect(warn.msg).toMatch(why);
    expect(warn.msg).toContain('keeping the bundled catalogue (genai-prices@0.1.8)');
    expect(new Pricer().priceVersion).toBe('genai-prices@0.1.8');
  });

  it('gives up on a server that does not answer within the timeout', async () => {
    const { lines, logger: log } = logger();
    const t = Date.now();
    const r = new PriceRefresher({
      dataDir: tempDir(),
      remoteUrl: `${base}/slow.json`,
      logger: log,
      fetch: { timeoutMs: 300 },
    });
    r.start();
    await r.settled();
    r.stop();
    expect(Date.now() - t).toBeLessThan(5_000);
    expect(lines.find((l) => l.level === 'warn')?.msg).toMatch(
      /cannot fetch it \(timed out\); keeping the bundled catalogue/,
    );
    expect(activePriceTable().origin).toBe('bundled');
  });

  it('a saved copy changed by `meter pricing update` is picked up; a corrupt one is refused with the reason', async () => {
    const dataDir = tempDir();
    const { lines, logger: log } = logger();
    const r = new PriceRefresher({ dataDir, remoteUrl: undefined, logger: log, watchIntervalMs: 50 });
    r.start();
    expect(activePriceTable().origin).toBe('bundled');
    const { savePriceData, parsePriceData } = await import('../../src/pricing/price-data.js');
    savePriceData(dataDir, parsePriceData(newerJson, { source: 'test', fetchedAt: AT.toISOString() }));
    await expect.poll(() => activePriceTable().origin, { timeout: 3_000 }).toBe('downloaded');
    const { writeFileSync } = await import('node:fs');
    writeFileSync(priceDataFile(dataDir), '{"truncated":');
    await expect
      .poll(
        () => lines.some((l) => l.level === 'warn' && l.msg.includes('saved copy in METER_DATA_DIR cannot be used')),
        { timeout: 3_000 },
      )
      .toBe(true);
    r.stop();
    expect(bundledJson.length).toBeGreaterThan(100_000);
  });
});
