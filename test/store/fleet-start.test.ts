/**
 * A fleet on one PostgreSQL database: sidecars started together on a new database choose one
 * mode (the choice is made under the migration lock, with the migration), and the continuous
 * aggregates are refreshed once per interval for the whole fleet (a claim in the database).
 * Multi-session behaviour, so plain PostgreSQL: the TimescaleDB test engine serves one session.
 */
import pg from 'pg';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { openStore } from '../../src/store/index.js';
import { MIGRATE_LOCK, loadMigrations, migrateLocked } from '../../src/store/migrate.js';
import { openPostgres } from '../../src/store/postgres.js';
import { inTimescaleMode } from '../../src/store/timescale/mode.js';
import { aggregateRefresher, claimRefresh } from '../../src/store/timescale/refresher.js';
import type { Db, Queryable } from '../../src/store/types.js';
import { atFileEnd } from '../helpers/cleanup.js';
import { createTestDatabase, postgresUrl, tempDir } from '../helpers/stores.js';

const silent = pino({ level: 'silent' });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function client(url: string): Promise<pg.Client> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  atFileEnd(() => c.end());
  return c;
}

describe.skipIf(!postgresUrl)('sidecars started together on a new database', () => {
  it('all open, in one mode, and every migration is applied once', async () => {
    const url = await createTestDatabase();
    const opens = await Promise.allSettled(
      Array.from({ length: 8 }, () => openStore({ databaseUrl: url, dataDir: tempDir(), dbPoolMax: 2 })),
    );
    const stores = opens.filter((o): o is PromiseFulfilledResult<Db> => o.status === 'fulfilled').map((o) => o.value);
    for (const s of stores) atFileEnd(() => s.close());
    expect(opens.filter((o) => o.status === 'rejected')).toEqual([]);
    expect(new Set(stores.map((s) => s.kind))).toEqual(new Set(['postgres']));
    const c = await client(url);
    const { rows } = await c.query<{ version: number; n: string }>(
      'SELECT version, count(*)::text AS n FROM schema_migrations GROUP BY version ORDER BY version',
    );
    expect(rows.map((r) => r.version)).toEqual(loadMigrations(undefined, 'postgres').map((m) => m.version));
    expect(rows.every((r) => r.n === '1')).toBe(true);
  });

  it('a sidecar waiting for the migration lock chooses its mode from what the holder left, not before', async () => {
    const url = await createTestDatabase();
    // Another sidecar holds the lock and builds a plain schema meanwhile.
    const holder = await client(url);
    await holder.query('SELECT pg_advisory_lock(hashtext($1))', [MIGRATE_LOCK]);
    const opening = openStore({ databaseUrl: url, dataDir: tempDir(), store: 'timescale', dbPoolMax: 1 });
    opening.catch(() => {});
    const waiting = async () =>
      (
        await holder.query<{ n: string }>(
          `SELECT count(*)::text AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND pid <> pg_backend_pid()`,
        )
      ).rows[0]!.n;
    await expect.poll(waiting, { timeout: 10_000, interval: 20 }).toBe('1');
    const conn: Queryable & { exec(sql: string): Promise<void> } = {
      query: async <T>(sql: string, params?: unknown[]) => (await holder.query(sql, params)).rows as T[],
      exec: async (sql: string) => void (await holder.query(sql)),
    };
    await migrateLocked(conn, 'postgres');
    await holder.query('SELECT pg_advisory_unlock(hashtext($1))', [MIGRATE_LOCK]);
    // Deciding before the lock, it would have tried to create TimescaleDB on an empty database.
    await expect(opening).rejects.toThrow(/METER_STORE=timescale, but this database is in plain PostgreSQL mode/);
  });
});

describe.skipIf(!postgresUrl)('one aggregate refresh per interval for the fleet', () => {
  /** n refreshers, each with its own pool (one per sidecar), recording when each refresh was
   *  claimed by the database's clock. */
  async function fleet(n: number, opts: { intervalMs: number; checkMs: number; failFirst?: boolean }) {
    const url = await createTestDatabase();
    const first = openPostgres(url);
    atFileEnd(() => first.close());
    await openStore({ databaseUrl: url, dataDir: tempDir(), store: 'postgres' }).then((s) => s.close());
    const claims: number[] = [];
    let failures = opts.failFirst ? 1 : 0;
    const refreshers = Array.from({ length: n }, () => {
      const store = inTimescaleMode(openPostgres(url, { max: 2 }));
      atFileEnd(() => store.close());
      return aggregateRefresher({
        store,
        logger: silent,
        intervalMs: opts.intervalMs,
        checkMs: opts.checkMs,
        refresh: async (conn) => {
          const [row] = await conn.query<{ ms: string }>(
            `SELECT (extract(epoch FROM started_at) * 1000)::bigint::text AS ms FROM aggregate_refresh`,
          );
          claims.push(Number(row!.ms));
          await sleep(20);
          if (failures-- > 0) throw new Error('refresh failed');
        },
      });
    });
    return { refreshers, claims, db: first };
  }

  it('several refreshers on one database refresh once per interval between them, never more, and do not let one lapse', async () => {
    const intervalMs = 1_000;
    const checkMs = 50;
    const { refreshers, claims } = await fleet(4, { intervalMs, checkMs });
    const t0 = Date.now();
    for (const r of refreshers) r.start!();
    await sleep(4_200);
    for (const r of refreshers) await r.stop!();
    const elapsed = Date.now() - t0;
    // Each alone would refresh at start and every interval: 4 × 5. Together: at most one per interval.
    expect(claims.length).toBeGreaterThanOrEqual(3);
    expect(claims.length).toBeLessThanOrEqual(Math.floor(elapsed / intervalMs) + 1);
    const gaps = claims.slice(1).map((t, i) => t - claims[i]!);
    for (const gap of gaps) expect(gap).toBeGreaterThanOrEqual(intervalMs);
    // A refresh starts within interval + one check of the last (slack for a loaded machine).
    for (const gap of gaps) expect(gap).toBeLessThan(intervalMs + checkMs + 700);
  });

  it('a refresh that fails hands its claim back: another sidecar retries at its next check, not an interval later', async () => {
    const { refreshers, claims } = await fleet(2, { intervalMs: 60_000, checkMs: 50, failFirst: true });
    for (const r of refreshers) r.start!();
    await expect.poll(() => claims.length, { timeout: 5_000, interval: 20 }).toBe(2);
    await sleep(300);
    for (const r of refreshers) await r.stop!();
    // The retry succeeded, so no third refresh within the minute.
    expect(claims.length).toBe(2);
    expect(claims[1]! - claims[0]!).toBeLessThan(2_000);
  });

  it('after 00:00:02 UTC a refresh claimed before it no longer counts: the closed day is refreshed at once', async () => {
    const { db } = await fleet(0, { intervalMs: 3_600_000, checkMs: 50 });
    const [{ late } = { late: false }] = await db.query<{ late: boolean }>(
      `SELECT now() < date_trunc('day', now(), 'UTC') + interval '3 s' AS late`,
    );
    if (late) return; // within 3 s of midnight the two cases below cannot be told apart
    await db.query(`UPDATE aggregate_refresh SET started_at = date_trunc('day', now(), 'UTC') - interval '1 s'`);
    expect(await claimRefresh(db, 3_600_000)).toBeDefined();
    expect(await claimRefresh(db, 3_600_000)).toBeUndefined();
  });
});
