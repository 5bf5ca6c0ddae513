/**
 * A fake Stripe on loopback that enforces what Stripe documents for
 * `POST /v1/billing/meter_events`: form encoding, `Authorization: Bearer` the secret key, the
 * required fields, a whole-number `payload[value]`, an `identifier` of at most 100 characters that
 * is unique (a second event with it is refused: "An event already exists with identifier …"), and
 * a `timestamp` within the past 35 calendar days (or 5 minutes ahead). Tests plan failures (429
 * with Retry-After, 5xx, a held answer, a connection cut after the event was accepted).
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { atFileEnd } from '../helpers/cleanup.js';

export interface AcceptedMeterEvent {
  identifier: string;
  event_name: string;
  customer: string;
  value: bigint;
  timestamp: number;
}

export type Planned =
  | { status: number; retryAfterS?: number; message?: string }
  /** Accepts the event, then cuts the connection before answering (the sender never hears). */
  | { cutAfterAccept: true }
  /** Holds the answer until `release` settles, then answers normally. */
  | { hold: Promise<unknown> };

export interface FakeStripe {
  url: string;
  key: string;
  accepted: AcceptedMeterEvent[];
  /** Every request, as received (method, path, headers, raw body). */
  requests: { path: string; headers: IncomingMessage['headers']; body: string }[];
  /** Answers the next requests with these, in order, before normal handling. */
  plan(...answers: Planned[]): void;
  /** Sum of accepted values per customer. */
  totals(): Map<string, bigint>;
  close(): Promise<void>;
}

const DAY_S = 86_400;

function stripeError(res: ServerResponse, status: number, message: string, headers: Record<string, string> = {}) {
  res.writeHead(status, { 'content-type': 'application/json', 'stripe-should-retry': 'false', ...headers });
  res.end(JSON.stringify({ error: { type: 'invalid_request_error', message } }));
}

export async function startFakeStripe(key = 'sk_test_fakeKey1234567890'): Promise<FakeStripe> {
  const accepted: AcceptedMeterEvent[] = [];
  const seen = new Set<string>();
  const requests: FakeStripe['requests'] = [];
  const planned: Planned[] = [];

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = Buffer.concat(chunks).toString('utf8');
    requests.push({ path: req.url ?? '', headers: req.headers, body });
    if (req.method !== 'POST' || req.url !== '/v1/billing/meter_events')
      return stripeError(res, 404, `Unrecognized request URL (${req.method}: ${req.url}).`);
    if (req.headers.authorization !== `Bearer ${key}`)
      return stripeError(res, 401, `Invalid API Key provided: ${String(req.headers.authorization).slice(7, 15)}****`);
    if (!String(req.headers['content-type']).startsWith('application/x-www-form-urlencoded'))
      return stripeError(res, 400, 'Invalid request: the body must be form-encoded');
    const next = planned.shift();
    if (next && 'status' in next) {
      const headers: Record<string, string> =
        next.retryAfterS === undefined ? {} : { 'retry-after': String(next.retryAfterS) };
      return stripeError(res, next.status, next.message ?? `planned ${next.status}`, headers);
    }
    if (next && 'hold' in next) await next.hold;
    const form = new URLSearchParams(body);
    const identifier = form.get('identifier') ?? '';
    const value = form.get('payload[value]') ?? '';
    const customer = form.get('payload[stripe_customer_id]') ?? '';
    const timestamp = Number(form.get('timestamp'));
    const eventName = form.get('event_name') ?? '';
    if (!eventName) return stripeError(res, 400, 'Missing required param: event_name.');
    if (!customer) return stripeError(res, 400, 'Missing required param: payload[stripe_customer_id].');
    if (!/^\d+$/.test(value)) return stripeError(res, 400, `Invalid integer: payload[value] ${value}`);
    if (identifier.length === 0 || identifier.length > 100)
      return stripeError(res, 400, 'Invalid identifier: must be 1 to 100 characters.');
    const now = Math.floor(Date.now() / 1000);
    if (!Number.isInteger(timestamp) || timestamp < now - 35 * DAY_S || timestamp > now + 300)
      return stripeError(
        res,
        400,
        'Timestamp must be within the past 35 calendar days or up to 5 minutes in the future.',
      );
    if (seen.has(identifier)) return stripeError(res, 400, `An event already exists with identifier ${identifier}.`);
    seen.add(identifier);
    accepted.push({ identifier, event_name: eventName, customer, value: BigInt(value), timestamp });
    if (next && 'cutAfterAccept' in next) {
      res.socket?.destroy();
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        object: 'billing.meter_event',
        created: now,
        event_name: eventName,
        identifier,
        livemode: false,
        payload: { stripe_customer_id: customer, value },
        timestamp,
      }),
    );
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((err: Error) => stripeError(res, 500, err.message));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  atFileEnd(close);
  return {
    url,
    key,
    accepted,
    requests,
    plan: (...answers) => planned.push(...answers),
    totals() {
      const t = new Map<string, bigint>();
      for (const e of accepted) t.set(e.customer, (t.get(e.customer) ?? 0n) + e.value);
      return t;
    },
    close,
  };
}
