import { statSync } from 'node:fs';
import { networkInterfaces } from 'node:os';
import { Writable } from 'node:stream';
import pino from 'pino';
import { Client } from 'undici';
import { beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { components } from '../../src/server/components.js';
import { startDaemon, type Daemon } from '../../src/server/daemon.js';
import { readLock } from '../../src/store/lockfile.js';
import { atFileEnd, tempDirAtFileEnd } from '../helpers/cleanup.js';

/**
 * The admin API and the exposure rules, against the real daemon on the embedded store bound to
 * 0.0.0.0: the admin API is a 0600 Unix socket that runs named commands with validated
 * arguments (no SQL, not on any network port); from another address of this host /proxy and
 * health answer, /metrics and admin do not; the start logs what is exposed.
 */

let daemon: Daemon;
let dataDir: string;
let logs = '';
let admin: Client;
let token: string;

beforeAll(async () => {
  dataDir = tempDirAtFileEnd();
  const sink = new Writable({
    write: (chunk, _enc, done) => {
      logs += chunk.toString();
      done();
    },
  });
  daemon = await startDaemon(
    loadConfig({ METER_HOST: '0.0.0.0', METER_PORT: '0', METER_DATA_DIR: dataDir }),
    pino({ level: 'warn' }, sink),
    components,
  );
  atFileEnd(() => daemon.close());
  const lock = readLock(dataDir)!;
  token = lock.adminToken!;
  admin = new Client('http://localhost', { socketPath: lock.adminSocket! });
  atFileEnd(() => admin.close());
}, 120_000);

const call = async (path: string, body: unknown, auth = `Bearer ${token}`) => {
  const res = await admin.request({
    path,
    method: 'POST',
    headers: { authorization: auth, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const json = (await res.body.json()) as { result?: unknown; error?: { code: string; message: string } };
  return { status: res.statusCode, ...json };
};

const port = () => new URL(daemon.url).port;

describe('the admin API', () => {
  it('is a 0600 Unix socket in METER_DATA_DIR, and the lock file names no network address for it', () => {
    const lock = readLock(dataDir)!;
    expect(lock.adminSocket).toBe(`${dataDir}/meter.sock`);
    expect(lock.adminUrl).toBeUndefined();
    expect(statSync(lock.adminSocket!).isSocket()).toBe(true);
    expect(statSync(lock.adminSocket!).mode & 0o777).toBe(0o600);
    expect(statSync(`${dataDir}/meter.lock`).mode & 0o777).toBe(0o600);
  });

  it('is not on the daemon’s port, token or not', async () => {
    for (const path of ['/admin/query', '/admin/accounts.list']) {
      const res = await fetch(`http://127.0.0.1:${port()}${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}` },
        body: '{"sql":"SELECT 1"}',
      });
      expect(res.status).toBe(404);
    }
  });

  it('needs the token', async () => {
    expect((await call('/admin/accounts.list', {}, 'Bearer wrong')).status).toBe(401);
    expect((await call('/admin/accounts.list', {}, '')).status).toBe(401);
  });

  it('runs no SQL: /admin/query and unknown commands are 404 naming the commands there are', async () => {
    const r = await call('/admin/query', { sql: 'DELETE FROM accounts' });
    expect(r.status).toBe(404);
    expect(r.error!.message).toContain('accounts.create');
    expect((await call('/admin/accounts.drop', {})).status).toBe(404);
    expect((await call('/admin/__proto__', {})).status).toBe(404);
  });

  it('validates arguments: wrong types, unknown fields and injection attempts are 400s naming the argument', async () => {
    const cases: [string, unknown, string][] = [
      ['/admin/accounts.create', { name: "x'); DROP TABLE accounts; --" }, 'invalid account name'],
      ['/admin/accounts.create', { name: 'ok', sql: 'SELECT 1' }, '"sql"'],
      ['/admin/accounts.create', { name: 42 }, '"name"'],
      ['/admin/keys.list', { account: "' OR 1=1 --" }, 'unknown account'],
      ['/admin/keys.rotate', { id: 'x', graceSeconds: -1 }, '"graceSeconds"'],
      ['/admin/plans.set', { plan: 'free', analytics: ['summary; DROP TABLE plans'] }, '"analytics.0"'],
      [
        '/admin/top.month',
        { params: ["1' OR '1'='1", '2026-11-01', '2026-12-01', '2026-11'] },
        'parameter $1 must be a uuid',
      ],
      ['/admin/budget.set', { account: 'a', monthlyUsd: '1e9', hardCap: false }, '"monthlyUsd"'],
    ];
    for (const [path, args, named] of cases) {
      const r = await call(path, args);
      expect({ path, status: r.status, code: r.error?.code }).toEqual({ path, status: 400, code: 'invalid_parameter' });
      expect(r.error!.message).toContain(named);
    }
    const after = await call('/admin/accounts.list', {});
    expect(after).toEqual({ status: 200, result: [] });
    expect((await call('/admin/plans.list', {})).result).toHaveLength(2);
  });

  it('runs what the CLI needs', async () => {
    const created = await call('/admin/accounts.create', { name: 'acme', plan: 'pro' });
    expect(created).toMatchObject({ status: 200, result: { name: 'acme', plan: 'pro' } });
    const key = await call('/admin/keys.create', { account: 'acme' });
    expect((key.result as { key: string }).key).toMatch(/^mk_[0-9a-f]{12}_/);
  });
});

describe('exposure with METER_HOST=0.0.0.0', () => {
  it('logs a warning naming what other hosts can reach', () => {
    const warning = logs.split('\n').find((l) => l.includes('METER_HOST=0.0.0.0'));
    expect(warning).toBeDefined();
    expect(JSON.parse(warning!)).toMatchObject({
      level: 40,
      exposed: ['/proxy/', '/analytics/', '/healthz', '/readyz'],
      metricsPort: null,
    });
    expect(warning).toContain('/metrics answers loopback peers only');
  });

  it('from this host’s own loopback: health and /metrics answer', async () => {
    expect((await fetch(`http://127.0.0.1:${port()}/healthz`)).status).toBe(200);
    expect((await fetch(`http://127.0.0.1:${port()}/metrics`)).status).toBe(200);
  });

  // Another address of this host stands in for a peer elsewhere (the traffic stays on the host).
  const outside = Object.values(networkInterfaces())
    .flat()
    .find((a) => a && a.family === 'IPv4' && !a.internal)?.address;
  it.runIf(outside !== undefined)(
    `from a non-loopback address (${outside}): /proxy and health answer, /metrics is 403, admin 404`,
    async () => {
      const base = `http://${outside}:${port()}`;
      expect((await fetch(`${base}/healthz`)).status).toBe(200);
      expect((await fetch(`${base}/proxy/openai/v1/models`)).status).toBe(401);
      expect((await fetch(`${base}/analytics/summary`)).status).toBe(401);
      expect((await fetch(`${base}/metrics`)).status).toBe(403);
      expect(
        (await fetch(`${base}/admin/accounts.list`, { method: 'POST', headers: { authorization: `Bearer ${token}` } }))
          .status,
      ).toBe(404);
    },
  );
});
