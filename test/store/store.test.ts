import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { BudgetMonitor } from '../../src/budget/monitor.js';
import { ChangeWatcher } from '../../src/pulse/changes.js';
import { openEmbedded } from '../../src/store/embedded.js';
import { insertBatch } from '../../src/store/event-batch.js';
import { lockPath, readLock, StoreLockedError } from '../../src/store/lockfile.js';
import { loadMigrations, migrate } from '../../src/store/migrate.js';
import { openPostgres } from '../../src/store/postgres.js';
import type { Db } from '../../src/store/types.js';
import { makeEvent } from '../analytics/helpers/seed.js';
import { createAccount, setBudgetRow, silentLogger } from '../budget/helpers/seed.js';
import { createTestDatabase, describeEachBackend, postgresUrl, tempDir } from '../helpers/stores.js';

describeEachBackend(
  'store',
  (backend) => {
    let db: Db;
    // Opening starts PGlite (embedded) or the TimescaleDB engine: WASM, slow on a loaded machine.
    beforeAll(async () => {
      db = await backend.open();
    }, 120_000);

    it('applies every migration once, and a second run is a no-op', async () => {
      const versions = (
        await db.query<{ version: number }>('SELECT version FROM schema_migrations ORDER BY version')
      ).map((r) => r.version);
      expect(versions).toEqual(loadMigrations(undefined, db.kind).map((m) => m.version));
      expect(await migrate(db)).toEqual([]);
    });

    it('has the schema later features build on, with the default plans', async () => {
      const tables = (
        await db.query<{ table_name: string }>(
          `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY 1`,
        )
      ).map((r) => r.table_name);
      for (const t of ['accounts', 'api_keys', 'plans', 'usage_events', 'usage_daily', 'usage_tag_daily']) {
        expect(tables).toContain(t);
      }
      const plans = await db.query<{ name: string; monthly_call_quota: number | null; max_active_keys: number }>(
        'SELECT name, monthly_call_quota, max_active_keys FROM plans ORDER BY name',
      );
      expect(plans).toEqual([
        { name: 'free', monthly_call_quota: 10000, max_active_keys: 2 },
        { name: 'pro', monthly_call_quota: null, max_active_keys: 25 },
      ]);
    });

    it('keeps money exact: NUMERIC(20,8) round-trips as a decimal string, sums included', async () => {
      await db.exec(`CREATE TABLE IF NOT EXISTS money_t (v numeric(20,8))`);
      await db.query('INSERT INTO money_t VALUES ($1), ($2), ($3)', ['0.1', '0.2', '123456789012.00000001']);
      const [row] = await db.query<{ s: string; d: string; n: string }>(
        `SELECT sum(v) AS s, '2026-11-21'::date AS d, 9007199254740993::int8 AS n FROM money_t`,
      );
      expect(row).toEqual({ s: '123456789012.30000001', d: '2026-11-21', n: '9007199254740993' });
    });

    it('rolls a failed transaction back', async () => {
      await expect(
        db.transaction(async (tx) => {
          await tx.query(`INSERT INTO accounts (name) VALUES ('rolled-back')`);
          throw new Error('boom');
        }),
      ).rejects.toThrow('boom');
      expect(await db.query(`SELECT 1 FROM accounts WHERE name = 'rolled-back'`)).toEqual([]);
      const [acct] = await db.transaction((tx) =>
        tx.query<{ plan: string }>(`INSERT INTO accounts (name) VALUES ('kept') RETURNING plan`),
      );
      expect(acct).toEqual({ plan: 'free' });
    });

    it('answers ping while open and not after close', async () => {
      expect(await db.ping()).toBe(true);
    });
  },
  { timescale: true },
);

describe.skipIf(!postgresUrl)('migrations on PostgreSQL', () => {
  it('two daemons migrating one database together do not race', async () => {
    const url = await createTestDatabase();
    const a = openPostgres(url);
    const b = openPostgres(url);
    try {
      const [ra, rb] = await Promise.all([migrate(a), migrate(b)]);
      const all = loadMigrations(undefined, 'postgres').map((m) => m.version);
      // Exactly one of them applied each migration; the other found it done.
      expect([...ra, ...rb].map((m) => m.version).sort((x, y) => x - y)).toEqual(all);
      const rows = await a.query<{ n: string }>('SELECT count(*) AS n FROM schema_migrations');
      expect(Number(rows[0]!.n)).toBe(all.length);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  it('runs without JIT, and parses and plans the event batch once per connection', async () => {
    const url = await createTestDatabase();
    const db = openPostgres(url, { max: 1 }); // one connection: the session the checks below see
    try {
      await migrate(db);
      await expectBatchPreparedOnce(db);
      expect(await db.query(`SELECT current_setting('jit') AS jit`)).toEqual([{ jit: 'off' }]);
    } finally {
      await db.close();
    }
  });

  it('the budget re-read and the pulse are named statements too', async () => {
    const url = await createTestDatabase();
    const db = openPostgres(url, { max: 1 });
    try {
      await migrate(db);
      await setBudgetRow(db, await createAccount(db, 'named'), '10');
      const changes = new ChangeWatcher(db, silentLogger, 50);
      const budgets = new BudgetMonitor(db, silentLogger, { sweepMs: 50 });
      for (let i = 0; i < 3; i++) {
        await changes.check();
        await budgets.refresh();
      }
      const prepared = await db.query<{ name: string; calls: number }>(
        `SELECT name, (generic_plans + custom_plans)::int AS calls FROM pg_prepared_statements ORDER BY name`,
      );
      expect(prepared).toEqual([
        { name: expect.stringMatching(/^meter_budget_spend_[0-9a-f]{12}$/), calls: 3 },
        { name: 'meter_pulse', calls: 3 },
      ]);
    } finally {
      await db.close();
    }
  });

  it('a failing migration names itself and leaves nothing half-applied', async () => {
    const url = await createTestDatabase();
    const db = openPostgres(url);
    try {
      const bad = [
        { version: 1, name: 'ok', sql: 'CREATE TABLE t1 (a int)' },
        { version: 2, name: 'broken', sql: 'CREATE TABLE t2 (a int); SELECT * FROM missing_table' },
      ];
      await expect(migrate(db, bad)).rejects.toThrow(/migration 2_broken failed: .*missing_table/);
      const tables = await db.query(`SELECT 1 FROM information_schema.tables WHERE table_name = 't2'`);
      expect(tables).toEqual([]);
      expect(await db.query('SELECT version FROM schema_migrations')).toEqual([{ version: 1 }]);
    } finally {
      await db.close();
    }
  });
});

/** Eight batches through insertBatch: one prepared statement, run eight times, on a generic
 *  plan once PostgreSQL has seen five custom ones (later batches are not planned); the rows
 *  arrive, text with quotes and backslashes unchanged. */
async function expectBatchPreparedOnce(db: Db): Promise<void> {
  const accountId = '0190a0b0-0000-4000-8000-00000000000a';
  const time = '2026-11-24T12:00:00.000Z';
  for (let i = 0; i < 8; i++) {
    const events = Array.from({ length: 3 }, () =>
      makeEvent({ accountId, time, model: `o'brien \\ "q" ${i}`, tags: { team: "it's" } }),
    );
    expect(await insertBatch(db, events)).toEqual({ inserted: 3 });
  }
  const prepared = await db.query<{ name: string; calls: string; generic_plans: string }>(
    `SELECT name, (generic_plans + custom_plans)::text AS calls, generic_plans::text FROM pg_prepared_statements`,
  );
  expect(prepared).toHaveLength(1);
  expect(prepared[0]).toMatchObject({ name: `meter_insert_events_${db.kind}`, calls: '8' });
  expect(Number(prepared[0]!.generic_plans)).toBeGreaterThan(0);
  const daily = await db.query<{ model: string; requests: string }>(
    'SELECT model, requests::text FROM usage_daily WHERE account_id = $1 ORDER BY model',
    [accountId],
  );
  expect(daily).toHaveLength(8);
  expect(daily[0]).toEqual({ model: `o'brien \\ "q" 0`, requests: '3' });
  expect(
    await db.query(`SELECT DISTINCT tags->>'team' AS team FROM usage_events WHERE account_id = $1`, [accountId]),
  ).toEqual([{ team: "it's" }]);
}

describe('embedded store: the event batch', () => {
  it('is prepared once in the worker and run with its JSON as a literal', async () => {
    const db = await openEmbedded(undefined);
    try {
      await migrate(db);
      await expectBatchPreparedOnce(db);
    } finally {
      await db.close();
    }
  });
});

describe.skipIf(process.platform !== 'linux')('embedded store: its worker thread', () => {
  /** The nice value of each thread of this process (field 19 of /proc/self/task/<tid>/stat). */
  const niceValues = () =>
    readdirSync('/proc/self/task').map((tid) =>
      Number(readFileSync(`/proc/self/task/${tid}/stat`, 'utf8').split(') ')[1]!.split(' ')[16]),
    );

  it('runs at a lower priority than the proxy, and nothing else does', async () => {
    const before = niceValues().filter((n) => n > 0).length;
    const db = await openEmbedded(undefined);
    try {
      expect(niceValues().filter((n) => n === 10)).toHaveLength(before + 1);
    } finally {
      await db.close();
    }
  });

  it('keeps the process priority for a CLI command that opens the store itself (yieldCpu false)', async () => {
    const before = niceValues().filter((n) => n > 0).length;
    const db = await openEmbedded(undefined, { yieldCpu: false });
    try {
      await db.query('SELECT 1');
      expect(niceValues().filter((n) => n > 0)).toHaveLength(before);
    } finally {
      await db.close();
    }
  });
});

describe('embedded store lock', () => {
  it('refuses a second live process with a clear message, and frees the lock on close', async () => {
    const dir = tempDir();
    const first = await openEmbedded(dir);
    // This process holds the lock; any other live pid in the file must be refused.
    writeFileSync(lockPath(dir), JSON.stringify({ pid: process.ppid }));
    const err = await openEmbedded(dir).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StoreLockedError);
    expect((err as Error).message).toMatch(new RegExp(`in use by process ${process.ppid}.*METER_DATA_DIR`));
    writeFileSync(lockPath(dir), JSON.stringify({ pid: process.pid }));
    await first.close();
    expect(readLock(dir)).toBeUndefined();
  });

  it('names the file system error and the directory when PGlite cannot use it, and frees the lock', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'pgdata'), 'a file where the data directory goes');
    const err = (await openEmbedded(dir).catch((e: unknown) => e)) as Error;
    expect(err.message).toBe(`the embedded store's files in ${join(dir, 'pgdata')} could not be used: ENOTDIR`);
    expect(readLock(dir)).toBeUndefined();
  });

  it('takes over a stale lock left by a dead process, and keeps the data', async () => {
    const dir = tempDir();
    const a = await openEmbedded(dir);
    await migrate(a);
    await a.query(`INSERT INTO accounts (name) VALUES ('survivor')`);
    await a.close();
    writeFileSync(lockPath(dir), JSON.stringify({ pid: 2 ** 22 + 12345 })); // no such process
    const b = await openEmbedded(dir);
    try {
      expect(readLock(dir)?.pid).toBe(process.pid);
      expect(await b.query(`SELECT name FROM accounts`)).toEqual([{ name: 'survivor' }]);
    } finally {
      await b.close();
    }
  });
});
