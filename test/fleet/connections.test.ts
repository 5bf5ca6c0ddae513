import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, writeFileSync } from 'node:fs';
import { createServer, connect } from 'node:net';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { createAccount } from '../../src/auth/accounts.js';
import { createKey, revokeKey } from '../../src/auth/keys.js';
import { setBudget } from '../../src/budget/admin.js';
import { loadConfig } from '../../src/config.js';
import { formatUnits, toUnits } from '../../src/money.js';
import { components } from '../../src/server/components.js';
import { startDaemon } from '../../src/server/daemon.js';
import { migrate } from '../../src/store/migrate.js';
import { openPostgres } from '../../src/store/postgres.js';
import type { Db } from '../../src/store/types.js';
import { atFileEnd, tempDirAtFileEnd } from '../helpers/cleanup.js';
import { type RunningDaemon } from '../helpers/daemon.js';
import { ACTUAL, answer, burst, post, WORST } from '../helpers/burst.js';
import { eventually, sleep, spawnSidecars } from '../helpers/fleet.js';
import { createTestDatabase, postgresUrl } from '../helpers/stores.js';
import { hasTool } from '../helpers/tools.js';
import { startFakeUpstream, type FakeUpstream } from '../helpers/upstreams.js';
import pino from 'pino';

// The fleet's connections (docs/fleet.md "Cost on the database"): an idle sidecar closes its
// connections between pulses, and meter works through PgBouncer in session mode with a pool
// smaller than what the sidecars could open.

/** Server connections to the test database other than the test's own. */
const connections = async (db: Db) =>
  (
    await db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_stat_activity
        WHERE datname = current_database() AND backend_type = 'client backend' AND application_name <> 'meter-test'`,
    )
  )[0]!.n;

/** Samples `connections` every 100 ms for `ms`: the mean and the peak. */
async function sample(db: Db, ms: number): Promise<{ mean: number; peak: number }> {
  const seen: number[] = [];
  const t0 = Date.now();
  while (Date.now() - t0 < ms) {
    seen.push(await connections(db));
    await sleep(100);
  }
  return { mean: seen.reduce((a, b) => a + b, 0) / seen.length, peak: Math.max(...seen) };
}

describe.skipIf(!postgresUrl)('idle sidecars give their connections back', () => {
  it('three idle sidecars with a pulse every second hold fewer than one connection each', async () => {
    const url = await createTestDatabase();
    const db = openPostgres(url, { max: 1, applicationName: 'meter-test' });
    atFileEnd(() => db.close());
    await migrate(db);
    await createAccount(db, 'idle', 'pro');
    await setBudget(db, 'idle', '10', false); // budget monitors have an account to watch
    const daemons = await Promise.all(
      [0, 1, 2].map(() =>
        startDaemon(
          loadConfig({
            DATABASE_URL: url,
            METER_PORT: '0',
            METER_DATA_DIR: tempDirAtFileEnd(),
            METER_KEY_REFRESH_MS: '1000',
            METER_DB_IDLE_MS: '200',
          }),
          pino({ level: 'silent' }),
          components,
        ),
      ),
    );
    atFileEnd(() => Promise.all(daemons.map((d) => d.close())));
    await sleep(1_500); // start-up's connections closed
    const idle = await sample(db, 4_000);
    console.info(
      `fleet: three idle sidecars held ${idle.mean.toFixed(2)} connections on average, ${idle.peak} at most`,
    );
    // Each pulse opens one for a few milliseconds and keeps it 200 ms: about 0.2 each, and
    // with a connection kept for good by each (the old 30 s idle timeout), 3 or more.
    expect(idle.mean).toBeLessThan(1.5);
  }, 30_000);
});

const PGBOUNCER = postgresUrl !== undefined && hasTool('pgbouncer', 'apt-get install pgbouncer');

/** Its pool: fewer server connections than three sidecars could open (10 each). */
const POOL_SIZE = 4;
const FIT = 20;

async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as { port: number }).port;
  await new Promise((r) => s.close(r));
  return port;
}

/** PgBouncer in session mode in front of the test server (trust auth, like the server). */
async function startPgBouncer(server: URL): Promise<{ port: number; child: ChildProcess }> {
  const dir = tempDirAtFileEnd();
  chmodSync(dir, 0o777); // it drops to the postgres user when started as root
  const port = await freePort();
  writeFileSync(join(dir, 'users.txt'), `"${server.username || 'root'}" ""\n`);
  writeFileSync(
    join(dir, 'pgbouncer.ini'),
    [
      '[databases]',
      `* = host=${server.hostname} port=${server.port || 5432}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = trust',
      `auth_file = ${join(dir, 'users.txt')}`,
      'pool_mode = session',
      `default_pool_size = ${POOL_SIZE}`,
      'max_client_conn = 200',
      'ignore_startup_parameters = extra_float_digits',
      `logfile = ${join(dir, 'pgbouncer.log')}`,
    ].join('\n'),
  );
  const args = process.getuid?.() === 0 ? ['-u', 'postgres', join(dir, 'pgbouncer.ini')] : [join(dir, 'pgbouncer.ini')];
  const child = spawn('pgbouncer', args, { stdio: 'ignore' });
  atFileEnd(() => child.kill('SIGTERM'));
  await eventually(
    () =>
      new Promise<boolean>((resolve) => {
        const c = connect(port, '127.0.0.1', () => (c.destroy(), resolve(true)));
        c.on('error', () => resolve(false));
      }),
    10_000,
    'PgBouncer listening',
  );
  return { port, child };
}

describe.skipIf(!postgresUrl || !PGBOUNCER)('three sidecar processes through PgBouncer in session mode', () => {
  let db: Db;
  let upstream: FakeUpstream;
  let daemons: RunningDaemon[];
  let key: string;
  let spare: string;

  beforeAll(async () => {
    const url = await createTestDatabase();
    db = openPostgres(url, { applicationName: 'meter-test' });
    atFileEnd(() => db.close());
    await migrate(db);
    await createAccount(db, 'capped', 'pro');
    key = (await createKey(db, 'capped')).key;
    spare = (await createKey(db, 'capped', 'spare')).key;
    // FIT worst cases less half of one: the FIT-th call is admitted with room left, then none.
    await setBudget(db, 'capped', formatUnits(WORST * BigInt(FIT) - WORST / 2n), true);
    const bouncer = await startPgBouncer(new URL(url));
    const throughBouncer = Object.assign(new URL(url), { port: String(bouncer.port) }).toString();
    upstream = await startFakeUpstream();
    daemons = await spawnSidecars(3, throughBouncer, upstream, { METER_DB_IDLE_MS: '200' });
  }, 180_000);

  it('the hard cap admits exactly the calls that fit, and every event is written once', async () => {
    const answers = await burst(
      upstream,
      daemons.map((d) => d.url),
      key,
    );
    expect(answers.filter((a) => a.status === 200)).toHaveLength(FIT);
    for (const a of answers.filter((x) => x.status !== 200))
      expect([a.status, a.code]).toEqual([402, 'budget_exceeded']);
    const written = async () =>
      (
        await db.query<{ spend: string; n: number }>(
          'SELECT coalesce(sum(cost), 0)::text AS spend, count(*)::int AS n FROM usage_events',
        )
      )[0]!;
    await eventually(async () => (await written()).n === FIT, 10_000, 'every call written');
    expect(toUnits((await written()).spend)).toBe(ACTUAL * BigInt(FIT));
  }, 60_000);

  it('the pulse reaches every sidecar: a revoked key is refused by each', async () => {
    for (const d of daemons) expect((await answer(await post(d.url, spare))).status).not.toBe(401);
    await revokeKey(db, spare);
    for (const d of daemons)
      await eventually(async () => (await answer(await post(d.url, spare))).status === 401, 10_000, 'the revocation');
  }, 30_000);

  it('the server never holds more connections than the pool', async () => {
    const { peak } = await sample(db, 1_500);
    expect(peak).toBeLessThanOrEqual(POOL_SIZE);
    expect(peak).toBeGreaterThan(0);
  }, 30_000);
});
