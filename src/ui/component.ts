/**
 * The spend page (CONTRACT §4): GET /ui serves a read-only page, and /ui/<file> its script, style
 * and chart library, all from the package (ui/ and uPlot from node_modules): no CDN, works
 * offline. The page reads the analytics API with a service key it keeps in the tab's session
 * storage; this route itself needs no key and serves no figures. METER_UI=off: not started (404).
 */
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import { extname, join } from 'node:path';
import { gzipSync } from 'node:zlib';
import type { Component, DaemonContext } from '../component.js';
import { packageRoot } from '../paths.js';
import { sendError } from '../http.js';

/** Headers for a page that holds a secret: only its own origin's script, style and API; never
 *  framed; no referrer sent anywhere; no MIME sniffing; no form submission (the key is never
 *  sent as a form field that could land in a URL). */
export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
  'x-content-type-options': 'nosniff',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
};

interface Asset {
  type: string;
  body: Buffer;
  gzip: Buffer;
  etag: string;
}

const require = createRequire(import.meta.url);
const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
};

/** What /ui/<name> serves: the files of ui/ (index.html at /ui itself) and the chart library. */
function files(): Map<string, string> {
  const dir = join(packageRoot, 'ui');
  const found = new Map<string, string>();
  for (const name of readdirSync(dir))
    if (extname(name) in TYPES) found.set(name === 'index.html' ? '' : name, join(dir, name));
  found.set('uplot.js', require.resolve('uplot/dist/uPlot.iife.min.js'));
  found.set('uplot.css', require.resolve('uplot/dist/uPlot.min.css'));
  return found;
}

/** Every file read (and compressed) once, at start: a missing one stops the daemon at once. */
function loadAssets(): Map<string, Asset> {
  const assets = new Map<string, Asset>();
  for (const [name, path] of files()) {
    const body = readFileSync(path);
    const etag = `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"`;
    assets.set(name, { type: TYPES[extname(path)]!, body, gzip: gzipSync(body, { level: 9 }), etag });
  }
  return assets;
}

export function createUi(): Component {
  const assets = loadAssets();
  const handle = (req: IncomingMessage, res: ServerResponse): void => {
    const path = new URL(req.url ?? '/', 'http://127.0.0.1').pathname;
    const name = path === '/ui' ? '' : path.startsWith('/ui/') ? path.slice(4) : undefined;
    const asset = name === undefined ? undefined : assets.get(name);
    if (!asset) return sendError(res, 404, 'not_found', `no route for ${req.method} ${path}`);
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      return sendError(
        res,
        405,
        'method_not_allowed',
        `${req.method} is not allowed on ${path}: the page answers GET`,
        {
          headers: { allow: 'GET, HEAD' },
        },
      );
    }
    const headers: Record<string, string | number> = {
      ...SECURITY_HEADERS,
      'content-type': asset.type,
      // Revalidated each time (a new version of meter serves new files at the same names).
      'cache-control': 'no-cache',
      etag: asset.etag,
      vary: 'accept-encoding',
    };
    if (req.headers['if-none-match'] === asset.etag) {
      res.writeHead(304, headers);
      return void res.end();
    }
    const gzip = /\bgzip\b/.test(String(req.headers['accept-encoding'] ?? ''));
    const body = gzip ? asset.gzip : asset.body;
    if (gzip) headers['content-encoding'] = 'gzip';
    res.writeHead(200, { ...headers, 'content-length': body.length });
    res.end(req.method === 'HEAD' ? undefined : body);
  };
  return { name: 'ui', routes: { '/ui': handle } };
}

/** The page in the daemon, unless METER_UI=off. */
export const uiComponent = ({ config }: DaemonContext): Component => (config.ui ? createUi() : { name: 'ui' });
