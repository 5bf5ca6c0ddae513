/** GET /ui and its files as the daemon serves them: the headers of a page that holds a secret,
 *  compressed when asked, revalidated by ETag, GET only; METER_UI=off: 404. */
import { gunzipSync } from 'node:zlib';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { startDaemon, type Daemon } from '../../src/server/daemon.js';
import { uiComponent } from '../../src/ui/component.js';
import { tempDirAtFileEnd } from '../helpers/cleanup.js';
import { createTestDatabase } from '../helpers/stores.js';

const start = async (ui: 'on' | 'off') =>
  startDaemon(
    loadConfig({
      METER_PORT: '0',
      METER_DATA_DIR: tempDirAtFileEnd(),
      DATABASE_URL: await createTestDatabase(),
      METER_UI: ui,
    }),
    pino({ level: 'silent' }),
    async (ctx, startComponent) => startComponent(uiComponent(ctx)),
  );

describe('the spend page route', () => {
  let on: Daemon;
  let off: Daemon;
  beforeAll(async () => {
    [on, off] = await Promise.all([start('on'), start('off')]);
  });
  afterAll(() => Promise.all([on?.close(), off?.close()]));

  it('serves the page and its files with the security headers, gzipped when asked', async () => {
    const page = await fetch(`${on.url}/ui`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(page.headers.get('content-security-policy')).toBe(
      "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    );
    expect(page.headers.get('x-frame-options')).toBe('DENY');
    expect(page.headers.get('referrer-policy')).toBe('no-referrer');
    expect(page.headers.get('x-content-type-options')).toBe('nosniff');
    const html = await page.text();
    // Every script and style is a file of the page's own: nothing inline, nothing from elsewhere.
    expect(html).not.toMatch(/<script(?![^>]*\ssrc="\/ui\/)/);
    expect(html).not.toMatch(/<style|\sstyle=|\son[a-z]+=|https?:\/\//);
    for (const [path, type] of [
      ['/ui/app.js', 'text/javascript'],
      ['/ui/style.css', 'text/css'],
      ['/ui/uplot.js', 'text/javascript'],
      ['/ui/uplot.css', 'text/css'],
      ['/ui/favicon.svg', 'image/svg+xml'],
    ] as const) {
      const res = await fetch(on.url + path);
      expect(res.status, path).toBe(200);
      expect(res.headers.get('content-type'), path).toContain(type);
      expect(res.headers.get('content-security-policy'), path).toContain("frame-ancestors 'none'");
    }
  });

  it('sends gzip only to a client that accepts it, and 304 for a copy it already has', async () => {
    // undici's fetch decodes gzip itself: ask for it by hand and decode here.
    const { request } = await import('undici');
    const plain = await request(`${on.url}/ui/uplot.js`, { headers: { 'accept-encoding': 'identity' } });
    const plainBody = Buffer.from(await plain.body.arrayBuffer());
    expect(plain.headers['content-encoding']).toBeUndefined();
    const zipped = await request(`${on.url}/ui/uplot.js`, { headers: { 'accept-encoding': 'gzip, br' } });
    expect(zipped.headers['content-encoding']).toBe('gzip');
    const zippedBody = Buffer.from(await zipped.body.arrayBuffer());
    expect(zippedBody.length).toBeLessThan(plainBody.length / 2);
    expect(gunzipSync(zippedBody).equals(plainBody)).toBe(true);
    const again = await fetch(`${on.url}/ui/uplot.js`, {
      headers: { 'if-none-match': String(plain.headers.etag) },
    });
    expect(again.status).toBe(304);
  });

  it('answers GET and HEAD only, and 404 for a file it does not have', async () => {
    const post = await fetch(`${on.url}/ui`, { method: 'POST' });
    expect(post.status).toBe(405);
    expect(post.headers.get('allow')).toBe('GET, HEAD');
    expect((await fetch(`${on.url}/ui`, { method: 'HEAD' })).status).toBe(200);
    for (const path of ['/ui/../package.json', '/ui/index.html.bak', '/uix', '/ui/%2e%2e/sql']) {
      const res = await fetch(on.url + path);
      expect(res.status, path).toBe(404);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe('not_found');
    }
  });

  it('is not there with METER_UI=off', async () => {
    const res = await fetch(`${off.url}/ui`);
    expect(res.status).toBe(404);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('not_found');
    expect((await fetch(`${off.url}/ui/app.js`)).status).toBe(404);
  });
});
