import { readdirSync, readFileSync, statSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { METER_BIN, runCli } from '../helpers/cli.js';
import { spawnDaemon, type RunningDaemon } from '../helpers/daemon.js';
import { tempDir } from '../helpers/stores.js';
import { startFakeUpstream, type FakeUpstream } from '../helpers/upstreams.js';

/**
 * CONTRACT §3: service keys and provider keys never appear in an error, a log line or the
 * database. The real daemon (every component, most verbose log level) proxies calls carrying
 * provider keys in every place the contract lets them travel, including a 502 from an
 * unreachable provider and failing alert deliveries; then its stdout, stderr, every answer and
 * every byte of its data directory (embedded database files, WAL, spool) are searched.
 */

const SECRETS = {
  geminiQuery: 'AIzaQUERYSECRET0123456789abcdef',
  geminiHeader: 'AIzaHEADERSECRET0123456789abcde',
  openaiBearer: 'sk-proj-BEARERSECRET0123456789ab',
  providerAuth: 'sk-PROVIDERAUTHSECRET0123456789a',
  anthropicKey: 'sk-ant-XAPIKEYSECRET0123456789ab',
  unreachableQuery: 'AIzaUNREACHABLESECRET012345678',
  unreachableBearer: 'sk-UNREACHABLEBEARER0123456789a',
  smtpPassword: 'SMTPPASSWORDSECRET0123456789',
  webhookSecret: 'whsec_WEBHOOKSECRET0123456789abcd',
  webhookPath: 'HOOKPATHSECRET0123456789',
  pricesPassword: 'PRICESPASSWORDSECRET0123456789',
  pricesToken: 'PRICESTOKENSECRET0123456789ab',
  upstreamUser: 'UPSTREAMUSERSECRET0123456789',
  upstreamQuery: 'UPSTREAMQUERYSECRET012345678',
};

async function closedPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address() as AddressInfo;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

function filesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? filesUnder(path) : [path];
  });
}

let fake: FakeUpstream;
let daemon: RunningDaemon | undefined;
let dataDir: string;
let key: string;
const answers: string[] = [];
let stopCode: number | null = null;
let logText = '';
let pricesServer: Server;
let pricesFetches = 0;

beforeAll(async () => {
  fake = await startFakeUpstream();
  fake.respond((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        id: 'chatcmpl-1',
        object: 'chat.completion',
        model: 'gpt-4o-mini',
        choices: [{ index: 0, message: { role: 'assistant', content: 'hi' }, finish_reason: 'stop' }],
        usage: { prompt_tokens: 1000, completion_tokens: 1000, total_tokens: 2000 },
      }),
    );
  });
  const dead = await closedPort();
  // METER_PRICES_REMOTE with a password and a token: fetched at start, refused (not price data)
  // and logged; the log must name the URL without them.
  pricesServer = createServer((_req, res) => {
    pricesFetches++;
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"not":"price data"}');
  });
  await new Promise<void>((r) => pricesServer.listen(0, '127.0.0.1', r));
  const pricesPort = (pricesServer.address() as AddressInfo).port;
  dataDir = tempDir();
  const env = {
    METER_DATA_DIR: dataDir,
    DATABASE_URL: '',
    METER_PORT: '0',
    METER_LOG_LEVEL: 'trace',
    METER_FLUSH_INTERVAL_MS: '50',
    METER_SMTP_URL: `smtp://alerts:${SECRETS.smtpPassword}@127.0.0.1:${dead}`,
    METER_UPSTREAM_OPENAI: `${fake.origin}/v1`,
    METER_UPSTREAM_GEMINI: fake.origin,
    METER_UPSTREAM_ANTHROPIC: `${fake.origin}/v1`,
    METER_UPSTREAM_GROQ: `http://127.0.0.1:${dead}/openai/v1`,
    METER_PRICES_REMOTE: `http://prices:${SECRETS.pricesPassword}@127.0.0.1:${pricesPort}/prices.json?token=${SECRETS.pricesToken}`,
  };
  expect((await runCli(['accounts', 'create', 'acme', '--plan', 'pro'], env)).code).toBe(0);
  key = JSON.parse((await runCli(['keys', 'create', '--account', 'acme', '--json'], env)).stdout).key;
  expect((await runCli(['budget', 'set', '--account', 'acme', '--monthly', '0.0001'], env)).code).toBe(0);
  const hook = `http://127.0.0.1:${dead}/hooks/${SECRETS.webhookPath}`;
  expect(
    (await runCli(['alerts', 'add', '--account', 'acme', '--webhook', hook, '--secret', SECRETS.webhookSecret], env))
      .code,
  ).toBe(0);
  expect((await runCli(['alerts', 'add', '--account', 'acme', '--email', 'ops@example.com'], env)).code).toBe(0);

  daemon = await spawnDaemon(process.execPath, [METER_BIN, 'start'], env);
  const call = async (
    path: string,
    headers: Record<string, string>,
    body = '{"model":"gpt-4o-mini","messages":[]}',
  ) => {
    const res = await fetch(`${daemon!.url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body,
    });
    answers.push(`${res.status} ${JSON.stringify([...res.headers])} ${await res.text()}`);
    return res.status;
  };
  expect(
    await call(`/proxy/gemini/v1beta/models/gemini-2.0-flash:generateContent?key=${SECRETS.geminiQuery}`, {
      'x-meter-key': key,
      'x-goog-api-key': SECRETS.geminiHeader,
    }),
  ).toBe(200);
  expect(
    await call('/proxy/openai/v1/chat/completions', {
      'x-meter-key': key,
      authorization: `Bearer ${SECRETS.openaiBearer}`,
    }),
  ).toBe(200);
  expect(
    await call('/proxy/openai/v1/chat/completions', {
      authorization: `Bearer ${key}`,
      'x-provider-authorization': `Bearer ${SECRETS.providerAuth}`,
    }),
  ).toBe(200);
  expect(
    await call('/proxy/anthropic/v1/messages', {
      authorization: `Bearer ${key}`,
      'x-api-key': SECRETS.anthropicKey,
      'anthropic-version': '2023-06-01',
    }),
  ).toBe(200);
  expect(
    await call(`/proxy/groq/openai/v1/chat/completions?key=${SECRETS.unreachableQuery}`, {
      'x-meter-key': key,
      authorization: `Bearer ${SECRETS.unreachableBearer}`,
    }),
  ).toBe(502);
  // A wrong secret for the real key id, and a key on a route that does not exist.
  expect(
    await call('/proxy/openai/v1/chat/completions', { authorization: `Bearer ${key.slice(0, 16)}${'A'.repeat(43)}` }),
  ).toBe(401);
  expect(await call(`/nowhere?key=${SECRETS.geminiQuery}`, { authorization: `Bearer ${key}` })).toBe(404);
  expect(fake.requests).toHaveLength(4);

  // The calls cost far more than the budget: alerts fire and their deliveries fail (dead port,
  // SMTP refused) and are logged. Wait for both failures to be logged.
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline && (daemon.stderr().match(/alert delivery failed/g) ?? []).length < 2) {
    await new Promise((r) => setTimeout(r, 200));
  }
  const running = daemon;
  stopCode = await running.stop('SIGTERM');
  daemon = undefined;
  logText = running.stderr();
}, 180_000);

afterAll(async () => {
  await daemon?.stop('SIGKILL');
  await new Promise((r) => pricesServer?.close(r));
});

describe('secrets never leak', () => {
  it('the calls went through with the provider credentials, and failing alerts were logged', () => {
    expect(stopCode).toBe(0);
    expect(fake.requests[0]!.url).toContain(`key=${SECRETS.geminiQuery}`);
    expect(fake.requests[2]!.headers.authorization).toBe(`Bearer ${SECRETS.providerAuth}`);
    // Both channels failed at least once, so the failure paths did run.
    expect(logText.match(/alert delivery failed/g)?.length ?? 0).toBeGreaterThanOrEqual(2);
  });

  it('not in the daemon’s logs', () => {
    expect(logText).toMatch(/"msg":"meter stopped"/);
    // The remote price data was fetched and its refusal logged, with the URL masked.
    expect(pricesFetches).toBeGreaterThanOrEqual(1);
    expect(logText).toContain('price data from METER_PRICES_REMOTE not used');
    expect(logText).toContain('token=***');
    for (const secret of [...Object.values(SECRETS), key.slice(16)]) expect(logText, secret).not.toContain(secret);
  });

  it('not in any answer (errors included)', () => {
    const text = answers.join('\n');
    expect(text).toContain('upstream_unreachable');
    for (const secret of [...Object.values(SECRETS), key.slice(16)]) expect(text, secret).not.toContain(secret);
  });

  it('not in `meter config`: every URL has its userinfo and token-like query parameters masked', async () => {
    const env = {
      METER_DATA_DIR: dataDir,
      DATABASE_URL: `postgres://meter:${SECRETS.smtpPassword}@127.0.0.1:5432/meter`,
      METER_PRICES_REMOTE: `https://prices:${SECRETS.pricesPassword}@example.com/p.json?token=${SECRETS.pricesToken}`,
      METER_UPSTREAM_OPENAI: `https://${SECRETS.upstreamUser}@proxy.example.com/v1?api_key=${SECRETS.upstreamQuery}&region=eu`,
      METER_UPSTREAM_GEMINI: `https://gw.example.com/?key=${SECRETS.geminiQuery}`,
    };
    for (const args of [['config'], ['config', '--json']]) {
      const out = await runCli(args, env);
      expect(out.code, out.stderr).toBe(0);
      const text = out.stdout + out.stderr;
      expect(text).toContain('proxy.example.com');
      expect(text).toContain('region=eu');
      for (const secret of Object.values(SECRETS)) expect(text, secret).not.toContain(secret);
    }
  });

  it('not in any file of the data directory (database files, WAL, spool)', () => {
    const files = filesUnder(dataDir);
    expect(files.length).toBeGreaterThan(10);
    const provider = [
      SECRETS.geminiQuery,
      SECRETS.geminiHeader,
      SECRETS.openaiBearer,
      SECRETS.providerAuth,
      SECRETS.anthropicKey,
      SECRETS.unreachableQuery,
      SECRETS.unreachableBearer,
      SECRETS.smtpPassword,
      SECRETS.pricesPassword,
      SECRETS.pricesToken,
      key.slice(16),
    ];
    let sawEvents = false;
    for (const file of files) {
      const bytes = readFileSync(file);
      sawEvents ||= bytes.includes('gemini-2.0-flash');
      for (const secret of provider) expect(bytes.includes(secret), `${secret} in ${file}`).toBe(false);
    }
    // The search does see what the daemon stored: the requested model of the Gemini call.
    expect(sawEvents).toBe(true);
  });
});
