import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import { carriesServiceKey } from '../auth/key-format.js';

/** Hop-by-hop (RFC 9110 §7.6.1) or set per connection by the next hop: never relayed.
 *  `host` is set by the upstream client; `expect` is answered by this server itself. */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'host',
  'expect',
  'http2-settings',
]);

/** Consumed by the service (CONTRACT §2): the service key, the provider credential under its
 *  own name, and the tagging headers. `authorization` is decided per request. */
const CONSUMED = new Set([
  'x-meter-key',
  'x-provider-authorization',
  'x-metering-tags',
  'x-feature-name',
  'x-tenant-id',
]);

/** Names listed in a Connection header (other than keep-alive/close) are hop-by-hop too. */
function connectionOptions(value: string | undefined): Set<string> | undefined {
  if (value === undefined || value === 'keep-alive' || value === 'close') return undefined; // nearly every call
  let names: Set<string> | undefined;
  for (const token of value.split(',')) {
    const name = token.trim().toLowerCase();
    if (name !== '' && name !== 'keep-alive' && name !== 'close') (names ??= new Set()).add(name);
  }
  return names;
}

/**
 * The headers sent upstream, as a flat [name, value, …] list in the client's order and case.
 * `viaMeterKey`: the service key came in X-Meter-Key, so Authorization is the provider's own.
 * X-Provider-Authorization, when sent, becomes Authorization and wins.
 */
export function upstreamRequestHeaders(
  req: { rawHeaders: string[]; headers: IncomingHttpHeaders },
  viaMeterKey: boolean,
): string[] {
  const raw = req.rawHeaders;
  const providerAuth = req.headers['x-provider-authorization'];
  const listed = connectionOptions(req.headers.connection);
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    const lower = name.toLowerCase();
    if (HOP_BY_HOP.has(lower) || CONSUMED.has(lower) || lower.startsWith('proxy-')) continue;
    // Without X-Meter-Key, Authorization carries the service key.
    if (lower === 'authorization' && (!viaMeterKey || providerAuth !== undefined)) continue;
    if (listed?.has(lower)) continue;
    const value = raw[i + 1]!;
    // A service key never goes upstream, under whatever header or spelling it came.
    if (carriesServiceKey(value)) continue;
    out.push(name, value);
  }
  if (typeof providerAuth === 'string' && !carriesServiceKey(providerAuth)) out.push('authorization', providerAuth);
  return out;
}

/** The provider's response headers minus hop-by-hop ones, plus the usage event's id. */
export function clientResponseHeaders(headers: IncomingHttpHeaders, requestId: string): OutgoingHttpHeaders {
  const connection = headers.connection;
  const listed = connectionOptions(Array.isArray(connection) ? connection.join(',') : connection);
  const out: OutgoingHttpHeaders = {};
  for (const name in headers) {
    if (HOP_BY_HOP.has(name) || name.startsWith('proxy-') || listed?.has(name)) continue;
    out[name] = headers[name];
  }
  out['x-meter-request-id'] = requestId;
  return out;
}
