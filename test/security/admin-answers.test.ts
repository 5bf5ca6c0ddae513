/**
 * A hostile or broken admin API (CONTRACT §7): the admin key never leaves the configured origin,
 * every page and number is bounded before it is parsed, a message echoing the key is scrubbed
 * before it is cut, and absurd figures fail the run on record with a line naming the field.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { beforeAll, describe, expect, it } from 'vitest';
import { localStore } from '../../src/admin/client.js';
import { fetchAnthropicReport } from '../../src/reconcile/anthropic.js';
import { MAX_PAGE_BYTES, ProviderApiError } from '../../src/reconcile/http.js';
import { fetchOpenAIReport } from '../../src/reconcile/openai.js';
import { adminApi, runReconciliation } from '../../src/reconcile/run.js';
import { Secret } from '../../src/secret.js';
import type { Db } from '../../src/store/types.js';
import { atFileEnd } from '../helpers/cleanup.js';
import { backends, postgresUrl } from '../helpers/stores.js';

/** An Anthropic admin key's length (159 characters). */
const KEY = `sk-ant-admin01-${'k7Qx'.repeat(36)}`;
const FROM = '2026-03-01';
const TO = '2026-03-02';

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

interface Server {
  origin: string;
  seen: IncomingMessage['headers'][];
  handle: Handler;
}

async function server(): Promise<Server> {
  const s: Server = { origin: '', seen: [], handle: (_req, res) => res.end('{}') };
  const http = createServer((req, res) => {
    s.seen.push(req.headers);
    s.handle(req, res);
  });
  await new Promise<void>((r) => http.listen(0, '127.0.0.1', r));
  s.origin = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;
  atFileEnd(() => new Promise<void>((r) => http.close(() => r())));
  return s;
}

const json = (res: ServerResponse, body: unknown, status = 200) => {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(typeof body === 'string' ? body : JSON.stringify(body));
};
const empty = { data: [], has_more: false, next_page: null };

function apis(origin: string) {
  const config = {
    upstreams: { openai: `${origin}/v1`, anthropic: `${origin}/v1` },
    adminKeys: { openai: new Secret(KEY), anthropic: new Secret(KEY) },
  };
  const fast = { attempts: 1, firstDelayMs: 1, maxDelayMs: 5 };
  return { config, openai: adminApi('openai', config, fast), anthropic: adminApi('anthropic', config, fast) };
}

const failure = (p: Promise<unknown>) =>
  p.then(
    () => expect.fail('the report was accepted'),
    (e: unknown) => e as Error,
  );

describe('the admin key stays at the configured origin', () => {
  it('a redirect to another origin is not followed (x-api-key and Authorization alike); one within it is', async () => {
    const admin = await server();
    const elsewhere = await server();
    elsewhere.handle = (_req, res) => json(res, empty);
    admin.handle = (req, res) => {
      if (req.url!.startsWith('/v1/moved')) return json(res, empty);
      res.writeHead(302, { location: `${elsewhere.origin}${req.url}` });
      res.end();
    };
    const { openai, anthropic } = apis(admin.origin);
    for (const [api, fetchReport] of [
      [anthropic, () => fetchAnthropicReport(anthropic, FROM, TO)],
      [openai, () => fetchOpenAIReport(openai, FROM, TO, { costByApiKey: false })],
    ] as const) {
      const err = await failure(fetchReport());
      expect(err).toBeInstanceOf(ProviderApiError);
      expect(err.message).toContain(`redirected to another origin (${elsewhere.origin}`);
      expect(err.message).toContain(api.keyVariable);
    }
    expect(elsewhere.seen).toEqual([]);

    // Within the origin: followed, with the key.
    admin.handle = (req, res) => {
      if (req.url!.startsWith('/v1/moved')) return json(res, empty);
      res.writeHead(301, { location: `/v1/moved${req.url!.slice(3)}` });
      res.end();
    };
    await expect(fetchAnthropicReport(anthropic, FROM, TO)).resolves.toMatchObject({ usage: [], costs: [] });
    expect(admin.seen.at(-1)!['x-api-key']).toBe(KEY);
  });
});

describe('provider answers are bounded before they are parsed', () => {
  let admin: Server;
  let api: ReturnType<typeof apis>;
  beforeAll(async () => {
    admin = await server();
    api = apis(admin.origin);
  });

  const costPage = (amount: unknown) => ({
    data: [{ starting_at: `${FROM}T00:00:00Z`, ending_at: `${TO}T00:00:00Z`, results: [{ amount, currency: 'USD' }] }],
    has_more: false,
    next_page: null,
  });

  it('an amount of 12 characters asking for 30 million digits is refused at once, naming the form', async () => {
    for (const amount of ['1e-30000000', '1e300000000', `0.${'1'.repeat(100)}`]) {
      admin.handle = (req, res) => json(res, req.url!.includes('cost_report') ? costPage(amount) : empty);
      const t0 = performance.now();
      const err = await failure(fetchAnthropicReport(api.anthropic, FROM, TO));
      expect(performance.now() - t0).toBeLessThan(5_000); // before: 2-5 s, or 31 s and 840 MB
      expect(err.message).toMatch(
        /^anthropic \/organizations\/cost_report: amount \(cents\) .* is not an amount \(a decimal of at most 40 characters, exponent within ±40\)$/,
      );
    }
    admin.handle = (req, res) => json(res, req.url!.includes('cost_report') ? costPage('1e15') : empty);
    expect((await failure(fetchAnthropicReport(api.anthropic, FROM, TO))).message).toContain(
      'is not an amount below $1,000,000,000,000',
    );
    admin.handle = (req, res) => json(res, req.url!.includes('cost_report') ? costPage('1.5e2') : empty);
    const ok = await fetchAnthropicReport(api.anthropic, FROM, TO);
    expect(ok.costs[0]!.amount).toBe(150_000_000n); // 150 cents
  });

  it('a page past the bound is refused unread, declared or chunked', async () => {
    const big = Buffer.alloc(MAX_PAGE_BYTES + 1, 0x20);
    for (const chunked of [false, true]) {
      admin.handle = (_req, res) => {
        res.writeHead(200, {
          'content-type': 'application/json',
          ...(chunked ? {} : { 'content-length': big.length }),
        });
        if (chunked) for (let i = 0; i < big.length; i += 1 << 20) res.write(big.subarray(i, i + (1 << 20)));
        res.end(chunked ? undefined : big);
      };
      const err = await failure(fetchOpenAIReport(api.openai, FROM, TO, { costByApiKey: false }));
      expect(err.message).toBe(
        `openai /organization/usage/completions answered a page over ${MAX_PAGE_BYTES} bytes (pages are bounded to ${MAX_PAGE_BYTES}, a report to ${8 * MAX_PAGE_BYTES}): the report is refused`,
      );
    }
  });

  it('a provider message echoing the key is scrubbed before it is cut to 300 characters', async () => {
    admin.handle = (_req, res) =>
      json(res, { error: { type: 'invalid_request_error', message: `${'x'.repeat(200)} ${KEY} bad request` } }, 400);
    const err = await failure(fetchAnthropicReport(api.anthropic, FROM, TO));
    expect(err.message).toContain('***');
    for (let i = 0; i + 12 <= KEY.length; i += 6) expect(err.message).not.toContain(KEY.slice(i, i + 12));
  });
});

describe('absurd figures fail the run on record, naming what was wrong', () => {
  let db: Db;
  let admin: Server;
  beforeAll(async () => {
    db = await (postgresUrl ? backends[1]! : backends[0]!).open();
    admin = await server();
  });

  const usagePage = (bucket: Record<string, unknown>) => ({ data: [bucket], has_more: false, next_page: null });
  const cases: [string, Record<string, unknown>, RegExp][] = [
    [
      '1e300 tokens',
      { start_time: 1772323200, end_time: 1772409600, results: [{ model: 'gpt-4o', input_tokens: 1e300 }] },
      /^openai \/organization\/usage\/completions: input_tokens 1e\+300 is not a count \(a whole number from 0 to 9007199254740991\)$/,
    ],
    [
      'start_time 1e20',
      { start_time: 1e20, end_time: 1e20, results: [{ model: 'gpt-4o', input_tokens: 1 }] },
      /^openai \/organization\/usage\/completions: a bucket starts at 100000000000000000000, not on one of the days asked for \(2026-03-01 to 2026-03-02, exclusive\)$/,
    ],
    [
      'a bucket of another day',
      { start_time: 1772323200 - 86400, end_time: 1772323200, results: [{ model: 'gpt-4o', input_tokens: 1 }] },
      /a bucket starts at 1772236800, not on one of the days asked for/,
    ],
  ];

  for (const [what, bucket, message] of cases) {
    it(what, async () => {
      admin.handle = (req, res) => json(res, req.url!.includes('/usage/completions') ? usagePage(bucket) : empty);
      const { config } = apis(admin.origin);
      const before = (await db.query('SELECT 1 FROM reconcile_runs')).length;
      const err = await failure(
        runReconciliation(localStore(db), { provider: 'openai', from: FROM, to: TO, config, retry: { attempts: 1 } }),
      );
      expect(err).toBeInstanceOf(ProviderApiError);
      expect(err.message).toMatch(message);
      const runs = await db.query<{ status: string; error: string }>(
        'SELECT status, error FROM reconcile_runs ORDER BY id',
      );
      expect(runs).toHaveLength(before + 1);
      expect(runs.at(-1)).toEqual({ status: 'failed', error: err.message });
    });
  }
});
