import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import pino from 'pino';
import { loadConfig } from '../../src/config.js';
import { components } from '../../src/server/components.js';
import { startDaemon, type Daemon } from '../../src/server/daemon.js';
import { createAccount } from '../../src/auth/accounts.js';
import { createKey } from '../../src/auth/keys.js';
import { migrate } from '../../src/store/migrate.js';
import { openPostgres } from '../../src/store/postgres.js';
import type { Db } from '../../src/store/types.js';
import { atFileEnd, tempDirAtFileEnd } from './cleanup.js';
import { spawnDaemon, type RunningDaemon } from './daemon.js';
import { createTestDatabase } from './stores.js';
import { startFakeUpstream, type FakeUpstream } from './upstreams.js';
import { METER_BIN } from './cli.js';

/** A full daemon, as `meter start` builds it, in this process, on a shared database (or, with
 *  `databaseUrl` undefined, on the embedded store in `env.METER_DATA_DIR`). Its OpenAI and
 *  Anthropic upstreams are `upstream`. */
export async function startFullDaemon(
  databaseUrl: string | undefined,
  upstream: FakeUpstream,
  env: Record<string, string> = {},
): Promise<Daemon> {
  const config = loadConfig({
    METER_PORT: '0',
    METER_DATA_DIR: tempDirAtFileEnd(),
    ...(databaseUrl ? { DATABASE_URL: databaseUrl } : {}),
    METER_UPSTREAM_OPENAI: `${upstream.origin}/v1`,
    METER_UPSTREAM_ANTHROPIC: `${upstream.origin}/v1`,
    METER_FLUSH_INTERVAL_MS: '100',
    METER_KEY_REFRESH_MS: '300',
    ...env,
  });
  const daemon = await startDaemon(config, pino({ level: 'silent' }), components);
  atFileEnd(() => daemon.close());
  return daemon;
}

/** `n` sidecars as shipped: `meter start` processes from dist/ (build first) on one database,
 *  their OpenAI upstream `upstream`; killed when the test file ends. */
export function spawnSidecars(
  n: number,
  databaseUrl: string,
  upstream: FakeUpstream,
  env: Record<string, string> = {},
): Promise<RunningDaemon[]> {
  return Promise.all(
    Array.from({ length: n }, async () => {
      const d = await spawnDaemon('node', [METER_BIN, 'start'], {
        DATABASE_URL: databaseUrl,
        METER_PORT: '0',
        METER_DATA_DIR: tempDirAtFileEnd(),
        METER_UPSTREAM_OPENAI: `${upstream.origin}/v1`,
        METER_FLUSH_INTERVAL_MS: '100',
        METER_KEY_REFRESH_MS: '300',
        METER_LOG_LEVEL: 'warn',
        ...env,
      });
      atFileEnd(() => d.stop('SIGKILL'));
      return d;
    }),
  );
}

/** The OpenAI SDK pointed at a daemon with a service key; no retries, so every refusal shows. */
export function openaiVia(daemon: Daemon, key: string): OpenAI {
  return new OpenAI({
    baseURL: `${daemon.url}/proxy/openai/v1`,
    apiKey: 'sk-provider',
    defaultHeaders: { 'x-meter-key': key },
    maxRetries: 0,
  });
}

/** The Anthropic SDK pointed at a daemon: its provider key stays, the service key rides in
 *  X-Meter-Key (DESIGN.md); no retries. */
export function anthropicVia(daemon: Daemon, key: string): Anthropic {
  return new Anthropic({
    baseURL: `${daemon.url}/proxy/anthropic`,
    apiKey: 'sk-ant-provider',
    defaultHeaders: { 'x-meter-key': key },
    maxRetries: 0,
  });
}

/** A Messages API answer with fixed usage, as Anthropic sends it. */
export function answerMessages(upstream: FakeUpstream, usage: { input: number; output: number }): void {
  upstream.respond((_req, res) => {
    const body = JSON.stringify({
      id: 'msg_01',
      type: 'message',
      role: 'assistant',
      model: 'claude-sonnet-4-20250514',
      content: [{ type: 'text', text: 'ok' }],
      stop_reason: 'end_turn',
      stop_sequence: null,
      usage: { input_tokens: usage.input, output_tokens: usage.output },
    });
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(body);
  });
}

/** A chat completion with fixed usage, as OpenAI sends it, after `delayMs` (or once a promise settles). */
export function answerChat(
  upstream: FakeUpstream,
  usage: { prompt: number; completion: number },
  delayMs: number | Promise<unknown> = 0,
): void {
  upstream.respond(async (_req, res) => {
    if (typeof delayMs !== 'number') await delayMs;
    else if (delayMs) await new Promise((r) => setTimeout(r, delayMs));
    const body = JSON.stringify({
      id: 'chatcmpl-1',
      object: 'chat.completion',
      created: 1763726400,
      model: 'gpt-4o-2024-08-06',
      choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }],
      usage: {
        prompt_tokens: usage.prompt,
        completion_tokens: usage.completion,
        total_tokens: usage.prompt + usage.completion,
      },
    });
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(body);
  });
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls until `check` returns true; the elapsed milliseconds, or throws after `timeoutMs`. */
export async function eventually(check: () => Promise<boolean>, timeoutMs: number, what: string): Promise<number> {
  const t0 = Date.now();
  while (Date.now() - t0 < timeoutMs) {
    if (await check()) return Date.now() - t0;
    await sleep(50);
  }
  throw new Error(`${what}: not within ${timeoutMs} ms`);
}

export interface Fleet {
  db: Db;
  key: string;
  upstream: FakeUpstream;
  daemons: Daemon[];
}

/** A fresh PostgreSQL database with one account and key, a fake OpenAI answering with fixed
 *  usage, and `sidecars` full daemons sharing the database. `setup` runs before they start
 *  (the account exists by then). */
export async function startFleet(opts: {
  account: string;
  plan: 'free' | 'pro';
  sidecars: number;
  usage?: { prompt: number; completion: number };
  delayMs?: number;
  setup?: (db: Db) => Promise<unknown>;
}): Promise<Fleet> {
  const url = await createTestDatabase();
  const db = openPostgres(url);
  atFileEnd(() => db.close());
  await migrate(db);
  await createAccount(db, opts.account, opts.plan);
  const { key } = await createKey(db, opts.account);
  await opts.setup?.(db);
  const upstream = await startFakeUpstream();
  answerChat(upstream, opts.usage ?? { prompt: 10, completion: 5 }, opts.delayMs);
  const daemons = await Promise.all(Array.from({ length: opts.sidecars }, () => startFullDaemon(url, upstream)));
  return { db, key, upstream, daemons };
}
