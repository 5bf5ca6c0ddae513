import { spawn } from 'node:child_process';
import { createServer, type AddressInfo } from 'node:net';
import { expect, it } from 'vitest';
import { packageRoot } from '../../src/paths.js';
import { atFileEnd, tempDirAtFileEnd } from '../helpers/cleanup.js';
import { databaseForFile } from '../helpers/file-stores.js';
import { startTcpProxy } from '../helpers/tcp-proxy.js';
import { METER_BIN } from '../helpers/cli.js';

/**
 * `meter start` as a container runs it: the database may come up after the daemon (compose,
 * a reboot), and `docker stop` may come at any moment of the start.
 */

/** The built daemon as a child process, with what it printed. */
function startChild(env: Record<string, string>) {
  const child = spawn(process.execPath, [METER_BIN, 'start'], {
    cwd: packageRoot,
    env: { ...process.env, METER_PORT: '0', METER_LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  atFileEnd(() => child.kill('SIGKILL'));
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => (out += d));
  child.stderr.on('data', (d: Buffer) => (err += d));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const until = async (what: () => boolean, ms = 60_000) => {
    const deadline = Date.now() + ms;
    while (!what()) {
      if (Date.now() > deadline) throw new Error(`timed out; stdout:\n${out}\nstderr:\n${err}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  };
  return { child, exited, until, out: () => out, err: () => err };
}

/** A port nothing listens on now. */
const freePort = () =>
  new Promise<number>((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as AddressInfo;
      s.close(() => resolve(port));
    });
  });

it('waits for a database that is not up yet, saying so, and starts once it answers', async () => {
  const database = await databaseForFile();
  const relay = await startTcpProxy(database);
  atFileEnd(() => relay.close());
  await relay.down();
  const url = relay.urlFor(database).replace('postgres://root@', 'postgres://root:pw-never-logged@');
  const port = await freePort();
  const d = startChild({ DATABASE_URL: url, METER_DATA_DIR: tempDirAtFileEnd(), METER_PORT: String(port) });
  await d.until(() => (d.err().match(/not reachable yet/g) ?? []).length >= 2);
  expect(d.out()).toBe('');
  // The first warning says where it waits (host and port, no password), for how long, and what
  // answers meanwhile: a wrong host or port must not look like a hang.
  const at = `${new URL(url).hostname}:${new URL(url).port}`;
  const first = d
    .err()
    .split('\n')
    .find((l) => l.includes('not reachable yet'))!;
  expect(first).toContain(`database at ${at} not reachable yet (ECONNREFUSED)`);
  expect(first).toContain('keeps trying for as long as it runs');
  expect(first).toContain('/healthz answers 200 and /readyz 503');
  expect(first).toContain('fix DATABASE_URL');
  expect(d.err().match(/keeps trying/g)).toHaveLength(1); // later warnings are short
  // Alive but not ready while it waits: a liveness probe must not restart it.
  const health = await fetch(`http://127.0.0.1:${port}/healthz`);
  expect(health.status).toBe(200);
  const ready = await fetch(`http://127.0.0.1:${port}/readyz`);
  expect(ready.status).toBe(503);
  expect(await ready.json()).toMatchObject({
    status: 'starting',
    reason: expect.stringMatching(/^waiting for the database \(ECONNREFUSED\), attempt \d+$/),
  });
  const call = await fetch(`http://127.0.0.1:${port}/proxy/openai/v1/models`);
  expect(call.status).toBe(503);
  expect(call.headers.get('retry-after')).toBe('1');
  expect(await call.json()).toMatchObject({ error: { code: 'starting' } });
  await relay.up();
  await d.until(() => d.out().includes('meter listening on'));
  const base = /meter listening on (\S+)/.exec(d.out())![1]!;
  expect((await fetch(`${base}/readyz`)).status).toBe(200);
  expect(d.err()).toContain('database reachable: starting');
  expect(d.err()).not.toContain('pw-never-logged');
  d.child.kill('SIGTERM');
  expect(await d.exited).toBe(0);
}, 120_000);

it('SIGTERM while waiting for the database stops the start at once, exit 0', async () => {
  const database = await databaseForFile();
  const relay = await startTcpProxy(database);
  atFileEnd(() => relay.close());
  await relay.down();
  const d = startChild({ DATABASE_URL: relay.urlFor(database), METER_DATA_DIR: tempDirAtFileEnd() });
  await d.until(() => d.err().includes('not reachable yet'));
  const t0 = Date.now();
  d.child.kill('SIGTERM');
  expect(await d.exited).toBe(0);
  expect(Date.now() - t0).toBeLessThan(3_000);
  expect(d.err()).toContain('stopped before the daemon started');
  expect(d.out()).toBe('');
}, 120_000);

it('a missing database is not waited for: it fails at once, naming DATABASE_URL', async () => {
  const url = (await databaseForFile()).replace(/\/[^/]*$/, '/meter_no_such_database');
  const d = startChild({ DATABASE_URL: url, METER_DATA_DIR: tempDirAtFileEnd() });
  expect(await d.exited).toBe(1);
  expect(d.err()).toContain('DATABASE_URL');
  expect(d.err()).not.toContain('not reachable yet');
}, 60_000);
