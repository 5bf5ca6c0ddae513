/**
 * The spend page in a real browser: Debian's chromium, headless, driven by playwright-core. A
 * daemon as shipped on PostgreSQL (through a relay the test can cut) with a fake provider; a few
 * tagged calls; then the page, logged in with a key, shows what the API says, to the last decimal.
 * The key is never in the URL, a cookie, localStorage or the daemon's log; a wrong key, a Free
 * key and a database that went away each get a message; the browser logs no error of its own.
 */
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import pino from 'pino';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAccount } from '../../src/auth/accounts.js';
import { createKey } from '../../src/auth/keys.js';
import { createBudget } from '../../src/budget/budgets-admin.js';
import { loadConfig } from '../../src/config.js';
import { packageRoot } from '../../src/paths.js';
import { saveRun } from '../../src/reconcile/store.js';
import { components } from '../../src/server/components.js';
import { startDaemon, type Daemon } from '../../src/server/daemon.js';
import { atFileEnd, tempDirAtFileEnd } from '../helpers/cleanup.js';
import { anthropicVia, answerChat, answerMessages, eventually, openaiVia } from '../helpers/fleet.js';
import { createTestDatabase } from '../helpers/stores.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.js';
import { hasTool } from '../helpers/tools.js';
import { startFakeUpstream } from '../helpers/upstreams.js';

const hasChromium = hasTool('chromium', 'apt-get install --no-install-recommends chromium');
const chromiumPath = () => spawnSync('sh', ['-c', 'command -v chromium'], { encoding: 'utf8' }).stdout.trim();

/** Money fields kept as the API wrote them: JSON text, not floats. */
const MONEY = /"(spend|amount|cost|budget|provider_cost|meter_cost|diff_usd)":(-?[0-9.eE+-]+)/g;
const exactJson = <T>(text: string): T => JSON.parse(text.replace(MONEY, '"$1":"$2"')) as T;
/** How the page writes a USD amount below $1,000: every decimal the API gave, at least cents. */
const shown = (text: string) => {
  const [whole, frac = ''] = text.split('.');
  return `$${whole}.${frac.replace(/0+$/, '').padEnd(2, '0')}`;
};
const units = (text: string) => {
  const [whole, frac = ''] = text.split('.');
  return BigInt(whole!) * 10n ** 8n + BigInt(frac.padEnd(8, '0'));
};
const fromUnits = (u: bigint) => `${u / 10n ** 8n}.${String(u % 10n ** 8n).padStart(8, '0')}`;

// What the callbacks run in the page touch of its globals (the tests compile without the DOM's types).
interface PageElement {
  textContent: string | null;
  value?: string;
  cells: ArrayLike<PageElement>;
  width: number;
  height: number;
  getContext(kind: '2d'): { getImageData(x: number, y: number, w: number, h: number): { data: ArrayLike<number> } };
}
declare const document: {
  getElementById(id: string): PageElement;
  querySelectorAll(selector: string): ArrayLike<PageElement>;
  documentElement: { outerHTML: string };
};
declare const localStorage: Record<string, string> & { length: number };
declare const sessionStorage: Record<string, string> & { length: number };
declare const performance: {
  getEntriesByType(type: string): unknown[];
  getEntriesByName(name: string): Timing[];
};
interface Timing {
  domContentLoadedEventEnd: number;
  transferSize: number;
  initiatorType: string;
  startTime: number;
}

interface Summary {
  month: string;
  spend: string;
  requests: number;
  by_model: { provider: string; model: string; spend: string; requests: number }[];
}

describe.skipIf(!hasChromium)('the spend page in a browser', () => {
  let daemon: Daemon;
  let relay: TcpProxy;
  let context: BrowserContext;
  let page: Page;
  let proKey: string;
  let freeKey: string;
  let log = '';
  /** Console errors and uncaught exceptions, with what the test was doing at the time. */
  const problems: { phase: string; text: string }[] = [];
  let phase = 'start';

  const api = async <T>(path: string, key = proKey): Promise<T> => {
    const res = await fetch(daemon.url + path, { headers: { authorization: `Bearer ${key}` } });
    expect(res.status, path).toBe(200);
    return exactJson<T>(await res.text());
  };
  const texts = (selector: string) =>
    page.$$eval(selector, (rows) =>
      rows.map((r) => Array.from((r as unknown as PageElement).cells, (c) => c.textContent!.trim())),
    );
  const logIn = async (key: string) => {
    await page.fill('#key', key);
    await page.click('#login button[type=submit]');
  };

  beforeAll(async () => {
    const database = await createTestDatabase();
    relay = await startTcpProxy(database);
    atFileEnd(() => relay.close());
    const upstream = await startFakeUpstream();
    atFileEnd(() => upstream.close());
    // The daemon's log at debug level, kept to check that the key never appears in it.
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        log += chunk.toString();
        done();
      },
    });
    daemon = await startDaemon(
      loadConfig({
        METER_PORT: '0',
        METER_DATA_DIR: tempDirAtFileEnd(),
        DATABASE_URL: relay.urlFor(database),
        METER_UPSTREAM_OPENAI: `${upstream.origin}/v1`,
        METER_UPSTREAM_ANTHROPIC: `${upstream.origin}/v1`,
        METER_FLUSH_INTERVAL_MS: '50',
        METER_KEY_REFRESH_MS: '300',
      }),
      pino({ level: 'debug' }, sink),
      components,
    );
    atFileEnd(() => daemon.close());

    await createAccount(daemon.store, 'acme', 'pro');
    await createAccount(daemon.store, 'tiny', 'free');
    proKey = (await createKey(daemon.store, 'acme')).key;
    freeKey = (await createKey(daemon.store, 'tiny')).key;
    await createBudget(daemon.store, 'acme', { amount: '0.0001' });
    await createBudget(daemon.store, 'acme', {
      amount: '5',
      scope: { kind: 'tag', key: 'team', value: 'search' },
      window: 'day',
      timezone: 'Europe/Paris',
    });

    // Eleven small OpenAI calls (a few thousandths of a cent each), tagged by team or not at
    // all, and one Anthropic call: two providers, two pages of events.
    answerChat(upstream, { prompt: 7, completion: 3 });
    const openai = openaiVia(daemon, proKey);
    for (let i = 0; i < 11; i++) {
      const tags = i < 6 ? 'team=search,env=prod' : i < 10 ? 'team=ads' : undefined;
      await openai.chat.completions.create(
        { model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] },
        tags ? { headers: { 'x-metering-tags': tags } } : {},
      );
    }
    answerMessages(upstream, { input: 100, output: 20 });
    await anthropicVia(daemon, proKey).messages.create(
      { model: 'claude-sonnet-4-20250514', max_tokens: 50, messages: [{ role: 'user', content: 'hi' }] },
      { headers: { 'x-metering-tags': 'team=search' } },
    );
    answerChat(upstream, { prompt: 1000, completion: 200 });
    await openaiVia(daemon, freeKey).chat.completions.create({
      model: 'gpt-4o',
      messages: [{ role: 'user', content: 'hi' }],
    });
    await eventually(
      async () => (await api<Summary>('/analytics/summary')).requests === 12,
      20_000,
      'twelve calls in the summary',
    );
    // A stored reconciliation result for today, as `meter reconcile` leaves one.
    const today = new Date().toISOString().slice(0, 10);
    const tomorrow = new Date(Date.now() + 86_400_000).toISOString().slice(0, 10);
    await saveRun(daemon.store, {
      provider: 'openai',
      scope: (await daemon.store.query<{ id: string }>("SELECT id::text AS id FROM accounts WHERE name = 'acme'"))[0]!
        .id,
      from: today,
      to: tomorrow,
      startedAt: new Date().toISOString(),
      rows: [
        {
          date: today,
          model: 'gpt-4o-2024-08-06',
          provider_requests: '11',
          provider_input_tokens: '77',
          provider_cached_input_tokens: '0',
          provider_output_tokens: '33',
          provider_cost: '0.0005',
          meter_requests: '11',
          meter_input_tokens: '77',
          meter_cached_input_tokens: '0',
          meter_output_tokens: '33',
          meter_cost: '0.0005225',
          findings: [],
        },
      ],
    });

    context = await chromium.launchPersistentContext(tempDirAtFileEnd(), {
      executablePath: chromiumPath(),
      headless: true,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
      viewport: { width: 1100, height: 900 },
      timezoneId: 'America/New_York',
      locale: 'en-US',
    });
    atFileEnd(() => context.close());
    page = context.pages()[0] ?? (await context.newPage());
    page.on('console', (m) => {
      if (m.type() === 'error' || m.type() === 'warning') problems.push({ phase, text: m.text() });
    });
    page.on('pageerror', (err) => problems.push({ phase, text: `uncaught: ${err.message}` }));
  }, 120_000);

  afterAll(() => {
    // Only the refusals the test provoked on purpose, each as the browser reports a failed fetch.
    const provoked: Record<string, RegExp> = { 'wrong key': /401/, 'free key': /403/, 'database down': /50[03]/ };
    const unexpected = problems.filter(
      (p) =>
        !provoked[p.phase] ||
        !/^Failed to load resource: the server responded with a status of \d+ /.test(p.text) ||
        !provoked[p.phase]!.test(p.text),
    );
    expect(unexpected).toEqual([]);
  });

  it('is served with headers for a page that holds a secret, and asks for a key', { timeout: 60_000 }, async () => {
    phase = 'pro';
    const res = await page.goto(`${daemon.url}/ui`);
    expect(res!.status()).toBe(200);
    const headers = res!.headers();
    expect(headers['content-security-policy']).toContain("default-src 'none'");
    expect(headers['content-security-policy']).toContain("script-src 'self'");
    expect(headers['content-security-policy']).toContain("frame-ancestors 'none'");
    expect(headers['content-security-policy']).not.toContain('unsafe-inline');
    expect(headers['x-frame-options']).toBe('DENY');
    expect(headers['referrer-policy']).toBe('no-referrer');
    expect(headers['x-content-type-options']).toBe('nosniff');
    await page.waitForSelector('#login:not([hidden])');
    expect(await page.isVisible('#dashboard')).toBe(false);
  });

  it(
    'shows, after logging in with a key, the figures the API gives, exactly, and draws the chart',
    { timeout: 60_000 },
    async () => {
      await logIn(proKey);
      await page.waitForSelector('#chart[data-drawn] canvas');
      await page.waitForSelector('#events tbody tr');
      await page.waitForSelector('#reconciliation table');

      const summary = await api<Summary>('/analytics/summary');
      const cards = await page.$$eval('#month .card', (cs) => cs.map((c) => c.textContent!));
      expect(cards[0]).toContain(shown(summary.spend));
      expect(cards[1]).toContain(String(summary.requests));
      // Small spend keeps its digits: no $0.0000 anywhere on the page.
      expect(await page.textContent('body')).not.toMatch(/\$0\.0000(?!\d)/);

      const models = await texts('#by-model tbody tr');
      expect(models).toEqual(
        summary.by_model.map((m) => [m.model, m.provider, String(m.requests), expect.any(String), shown(m.spend)]),
      );
      const perProvider = new Map<string, bigint>();
      for (const m of summary.by_model)
        perProvider.set(m.provider, (perProvider.get(m.provider) ?? 0n) + units(m.spend));
      const providers = await texts('#by-provider tbody tr');
      expect(providers.map((r) => [r[0], r[2]]).sort()).toEqual(
        [...perProvider].map(([p, u]) => [p, shown(fromUnits(u))]).sort(),
      );

      const { days } = await api<{ days: { date: string; spend: string; requests: number }[] }>(
        '/analytics/daily?days=30',
      );
      const total = days.reduce((sum, d) => sum + units(d.spend), 0n);
      expect(await page.textContent('#daily .total')).toContain(shown(fromUnits(total)));
      expect(await page.getAttribute('#chart', 'data-drawn')).toBe('30');
      // The bars are drawn: the plot's canvas has painted pixels.
      const painted = await page.$eval('#chart canvas', (c) => {
        const canvas = c as unknown as PageElement;
        const data = canvas.getContext('2d')!.getImageData(0, 0, canvas.width, canvas.height).data;
        let n = 0;
        for (let i = 3; i < data.length; i += 4) if (data[i]! > 0) n++;
        return n;
      });
      expect(painted).toBeGreaterThan(500);

      const { budgets } = await api<{
        budgets: { spend: string; amount: string; state: string; levels_fired: number[] }[];
      }>('/analytics/budgets');
      const budgetRows = await texts('#budgets tbody tr');
      expect(budgetRows).toHaveLength(2);
      expect(budgetRows.map((r) => [r[2], r[3], r[7]])).toEqual(
        budgets.map((b) => [shown(b.spend), shown(b.amount), b.state.replace('_', ' ')]),
      );

      const { events } = await api<{ events: { cost: string; model: string; time: string }[] }>(
        '/analytics/events?limit=10',
      );
      const eventRows = await texts('#events tbody tr');
      expect(eventRows.map((r) => [r[1], r[4]])).toEqual(events.map((e) => [e.model, shown(e.cost)]));
      // Times in the browser's zone (New York here), the heading naming it; UTC on hover.
      const newYork = new Intl.DateTimeFormat('en-US', {
        timeZone: 'America/New_York',
        year: 'numeric',
        month: 'short',
        day: 'numeric',
        hour: '2-digit',
        minute: '2-digit',
        second: '2-digit',
      });
      expect(eventRows.map((r) => r[0])).toEqual(events.map((e) => newYork.format(new Date(e.time))));
      expect(await page.textContent('#events th')).toBe('Time (America/New_York)');
      expect(await page.getAttribute('#events tbody tr time', 'title')).toBe(`${events[0]!.time} (UTC)`);
      await page.click('#older');
      await page.waitForFunction(() => document.querySelectorAll('#events tbody tr').length === 2);
      await page.click('#newer');
      await page.waitForFunction(() => document.querySelectorAll('#events tbody tr').length === 10);

      const recon = await texts('#reconciliation tbody tr');
      expect(recon).toEqual([
        [
          'openai',
          summary.month,
          new Date().toISOString().slice(0, 10),
          '$0.0005',
          '$0.0005225',
          '$0.0000225 (4.5%)',
          'none',
        ],
      ]);
    },
  );

  it('shows spend by the tag key the user picks', { timeout: 60_000 }, async () => {
    await page.fill('#tag-key', 'team');
    await page.click('#tag-form button[type=submit]');
    await page.waitForSelector('#by-tag tbody tr');
    const { groups } = await api<{ groups: { value: string | null; spend: string; requests: number }[] }>(
      '/analytics/by-tag?key=team&period=month',
    );
    expect(groups.map((g) => g.value).sort()).toEqual(['ads', 'search', null].sort());
    expect(await texts('#by-tag tbody tr')).toEqual(
      groups.map((g) => [g.value ?? '(untagged)', String(g.requests), shown(g.spend)]),
    );
    // docs/ui.png is this page; it is rewritten only when asked (METER_UPDATE_SCREENSHOT=1), so a
    // test run leaves the tree as it found it.
    const shot = await page.screenshot({ fullPage: true });
    expect(shot.length).toBeGreaterThan(10_000);
    if (process.env.METER_UPDATE_SCREENSHOT === '1') writeFileSync(join(packageRoot, 'docs/ui.png'), shot);
  });

  it('keeps the key in the tab only: not in the URL, a cookie, localStorage, the page or the log', async () => {
    expect(page.url()).toBe(`${daemon.url}/ui`);
    expect(await context.cookies()).toEqual([]);
    const storage = await page.evaluate(() => ({
      local: JSON.stringify({ ...localStorage }),
      session: JSON.stringify({ ...sessionStorage }),
      html: document.documentElement.outerHTML,
      input: document.getElementById('key').value,
    }));
    expect(storage.local).toBe('{}');
    expect(storage.session).toContain(proKey);
    expect(storage.html).not.toContain(proKey);
    expect(storage.input).toBe('');
    expect(log.length).toBeGreaterThan(0);
    expect(log).not.toContain(proKey);
    expect(log).not.toContain(proKey.slice('mk_000000000000_'.length)); // the secret alone
  });

  it('measures a cold load: transfer and time to the first chart', { timeout: 60_000 }, async () => {
    const cdp = await context.newCDPSession(page);
    await cdp.send('Network.enable');
    await cdp.send('Network.setCacheDisabled', { cacheDisabled: true });
    await page.reload();
    await page.waitForSelector('#chart[data-drawn] canvas');
    await page.waitForSelector('#reconciliation table');
    const figures = await page.evaluate(() => {
      const nav = performance.getEntriesByType('navigation')[0] as unknown as Timing;
      const resources = performance.getEntriesByType('resource') as unknown as Timing[];
      const sum = (rs: Timing[]) => rs.reduce((n, r) => n + r.transferSize, 0);
      const api = resources.filter((r) => r.initiatorType === 'fetch');
      return {
        pageBytes: nav.transferSize + sum(resources.filter((r) => r.initiatorType !== 'fetch')),
        apiBytes: sum(api),
        readyMs: nav.domContentLoadedEventEnd,
        firstChartMs: performance.getEntriesByName('meter:first-chart')[0]!.startTime,
      };
    });
    await cdp.send('Network.setCacheDisabled', { cacheDisabled: false });
    await cdp.detach();
    console.log(
      `spend page, cold load: page ${(figures.pageBytes / 1024).toFixed(1)} KB, API ${(figures.apiBytes / 1024).toFixed(1)} KB, page ready at ${figures.readyMs.toFixed(0)} ms, first chart at ${figures.firstChartMs.toFixed(0)} ms`,
    );
    expect(figures.pageBytes).toBeGreaterThan(10_000);
    expect(figures.firstChartMs).toBeGreaterThan(0);
  });

  it('says so when a key is malformed or refused, and keeps a refused key nowhere', { timeout: 60_000 }, async () => {
    phase = 'wrong key';
    await page.click('#sign-out');
    await page.waitForSelector('#login:not([hidden])');
    expect(await page.evaluate(() => sessionStorage.length)).toBe(1); // the tag key, a preference
    await logIn('hello');
    await page.waitForSelector('#notice:not([hidden])');
    expect(await page.textContent('#notice')).toContain('not a service key');
    const wrong = `mk_000000000000_${'x'.repeat(32)}`;
    await logIn(wrong);
    await page.waitForFunction(() => document.getElementById('notice').textContent!.includes('refused'));
    expect(await page.textContent('#notice')).toContain('a valid service key is required');
    expect(await page.isVisible('#dashboard')).toBe(false);
    expect(await page.evaluate(() => JSON.stringify({ ...sessionStorage }))).not.toContain(wrong);
  });

  it('shows a Free key what its plan includes, and a note for the rest', { timeout: 60_000 }, async () => {
    phase = 'free key';
    await logIn(freeKey);
    await page.waitForSelector('#chart[data-drawn] canvas');
    await page.waitForSelector('#events .plan');
    await page.waitForSelector('#by-tag .plan');
    const summary = await api<Summary>('/analytics/summary', freeKey);
    expect((await page.$$eval('#month .card', (cs) => cs.map((c) => c.textContent!)))[0]).toContain(
      shown(summary.spend),
    );
    expect(await page.textContent('#events .plan')).toContain('free plan does not include /analytics/events');
    expect(await page.textContent('#by-tag .plan')).toContain('free plan does not include /analytics/by-tag');
    expect(await page.isVisible('#notice')).toBe(false);
  });

  it(
    'says the database is unreachable when it is, and shows the figures again when it is back',
    {
      timeout: 60_000,
    },
    async () => {
      phase = 'pro';
      await page.click('#sign-out');
      await logIn(proKey);
      await page.waitForSelector('#events tbody tr');
      phase = 'database down';
      await relay.down();
      await page.click('#refresh');
      await page.waitForSelector('#notice:not([hidden])');
      expect(await page.textContent('#notice')).toContain('cannot reach its database');
      await relay.up();
      // Back once every endpoint the page reads answers again (the pool's cut connections are
      // replaced as they fail).
      const paths = ['/readyz', '/analytics/summary', '/analytics/daily', '/analytics/budgets', '/analytics/events'];
      await eventually(
        async () => {
          const statuses = await Promise.all(
            paths.map(
              async (p) => (await fetch(daemon.url + p, { headers: { authorization: `Bearer ${proKey}` } })).status,
            ),
          );
          return statuses.every((s) => s === 200);
        },
        20_000,
        'the database back',
      );
      phase = 'pro';
      await page.click('#refresh');
      await page.waitForSelector('#notice', { state: 'hidden' });
      await page.waitForSelector('#chart[data-drawn] canvas');
    },
  );
});
