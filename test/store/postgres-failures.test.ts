import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runRetention } from '../../src/plans/retention.js';
import { migrate } from '../../src/store/migrate.js';
import { openPostgres } from '../../src/store/postgres.js';
import type { Db } from '../../src/store/types.js';
import { cutAfterCommit, cutConnects, cutReplyTo, startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.js';
import { createTestDatabase, postgresUrl } from '../helpers/stores.js';

/**
 * A checked-out pg client whose connection dies must not take the process with it (pg emits
 * 'error' on it; vitest fails the file on such an unhandled error), and the pool must hand out
 * working clients afterwards. Cuts at chosen moments of the wire protocol, through a relay.
 */

describe.skipIf(!postgresUrl)('PostgreSQL store: connections that die while a client is held', () => {
  let url: string;
  let direct: Db;
  let relay: TcpProxy;
  let db: Db;

  beforeAll(async () => {
    url = await createTestDatabase();
    direct = openPostgres(url);
    await migrate(direct);
    await direct.exec('CREATE TABLE chaos (id int PRIMARY KEY)');
    relay = await startTcpProxy(url);
    db = openPostgres(relay.urlFor(url), { max: 2 });
  });
  afterAll(async () => {
    relay.tap(undefined);
    await db.close();
    await relay.close();
    await direct.close();
  });

  const works = async () => {
    relay.tap(undefined);
    expect(await db.transaction((tx) => tx.query<{ one: number }>('SELECT 1 AS one'))).toEqual([{ one: 1 }]);
    expect(await db.withAdvisoryLock('chaos', (c) => c.query<{ two: number }>('SELECT 2 AS two'))).toEqual([
      { two: 2 },
    ]);
  };

  it('a cut mid-statement fails the transaction, nothing is committed, and the next one works', async () => {
    relay.tap(cutReplyTo('INSERT INTO chaos'));
    await expect(db.transaction((tx) => tx.query('INSERT INTO chaos VALUES (1)'))).rejects.toThrow(
      /terminated|ECONNRESET/,
    );
    await works();
    expect(await direct.query('SELECT id FROM chaos WHERE id = 1')).toEqual([]);
  });

  it('a lost COMMIT acknowledgement fails the transaction, though the server committed', async () => {
    relay.tap(cutAfterCommit('INSERT INTO chaos'));
    await expect(db.transaction((tx) => tx.query('INSERT INTO chaos VALUES (2)'))).rejects.toThrow(
      /terminated|ECONNRESET/,
    );
    await works();
    expect(await direct.query<{ id: number }>('SELECT id FROM chaos WHERE id = 2')).toEqual([{ id: 2 }]);
  });

  it('a cut during connect fails the call, and the next connect works', async () => {
    const fresh = openPostgres(relay.urlFor(url), { max: 1 });
    relay.tap(cutConnects());
    await expect(fresh.transaction((tx) => tx.query('SELECT 1'))).rejects.toThrow();
    await expect(fresh.query('SELECT 1')).rejects.toThrow();
    relay.tap(undefined);
    expect(await fresh.query<{ one: number }>('SELECT 1 AS one')).toEqual([{ one: 1 }]);
    await fresh.close();
  });

  it('a cut while an advisory lock is held fails fn, and the lock is free again', async () => {
    relay.tap(cutReplyTo('SELECT 3 AS cut'));
    await expect(db.tryAdvisoryLock('chaos-lock', (c) => c.query('SELECT 3 AS cut'))).rejects.toThrow(
      /terminated|ECONNRESET/,
    );
    relay.tap(undefined);
    // The dead session's lock goes with it: another session takes it.
    const deadline = Date.now() + 5_000;
    let got: unknown;
    while (got === undefined && Date.now() < deadline)
      got = await direct.tryAdvisoryLock('chaos-lock', async () => 'mine');
    expect(got).toBe('mine');
    await works();
  });

  it("a cut during retention's deletes fails that run, and the next run works", async () => {
    relay.tap(cutReplyTo('DELETE FROM usage_daily'));
    await expect(runRetention(db)).rejects.toThrow(/terminated|ECONNRESET/);
    relay.tap(undefined);
    expect(await runRetention(db)).toEqual({ rawEvents: 0, rollupRows: 0, claims: 0 });
    await works();
  });

  it('the server ending the session mid-statement (a restart, pg_terminate_backend) fails only that call', async () => {
    const running = db.transaction((tx) => tx.query("SELECT pg_sleep(10), 'terminate-me'"));
    const settled = running.catch((err: Error) => err);
    const deadline = Date.now() + 5_000;
    let killed = 0;
    while (killed === 0 && Date.now() < deadline) {
      [{ killed }] = (await direct.query<{ killed: number }>(
        "SELECT count(pg_terminate_backend(pid))::int AS killed FROM pg_stat_activity WHERE query LIKE '%terminate-me''%' AND pid <> pg_backend_pid()",
      )) as [{ killed: number }];
    }
    expect(killed).toBe(1);
    expect(String(await settled)).toMatch(/terminat/);
    await works();
  });

  it('a refused connection (nothing listening) fails the call, and the store works once it is back', async () => {
    await relay.down();
    // The idle clients' sockets were cut; a new connection is refused.
    await expect(db.transaction((tx) => tx.query('SELECT 1'))).rejects.toThrow();
    await expect(db.transaction((tx) => tx.query('SELECT 1'))).rejects.toThrow(/ECONNREFUSED/);
    expect(await db.ping()).toBe(false);
    await relay.up();
    await works();
  });

  it('an unknown host fails the call with a clear error, and nothing else happens', async () => {
    const nowhere = openPostgres('postgres://root@meter-no-such-host.invalid:5432/test', { max: 1 });
    await expect(nowhere.transaction((tx) => tx.query('SELECT 1'))).rejects.toThrow(/ENOTFOUND|EAI_AGAIN|getaddrinfo/);
    expect(await nowhere.ping()).toBe(false);
    await nowhere.close();
  });
});
