import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, expect, it } from 'vitest';
import { claimDueDeliveries } from '../../src/alerts/outbox.js';
import { BudgetMonitor } from '../../src/budget/monitor.js';
import { insertBatch } from '../../src/store/event-batch.js';
import type { Db, QueryOptions } from '../../src/store/types.js';
import { waitFor } from '../alerts/helpers/receivers.js';
import { makeEvent } from '../analytics/helpers/seed.js';
import { createAccount, seedSpend, setBudgetRow, silentLogger } from '../budget/helpers/seed.js';
import { describeEachBackend } from '../helpers/stores.js';

/** The store as the daemon uses it, counting the named statements it is given (the re-reads):
 *  `calls(prefix)` sums those whose name starts with it. */
function counting(db: Db): { db: Db; calls(prefix: string): number } {
  const calls = new Map<string, number>();
  const query = <T>(sql: string, params?: unknown[], opts?: QueryOptions) => {
    if (opts?.name) calls.set(opts.name, (calls.get(opts.name) ?? 0) + 1);
    return db.query<T>(sql, params, opts);
  };
  const sum = (prefix: string) => [...calls].reduce((n, [name, c]) => n + (name.startsWith(prefix) ? c : 0), 0);
  return { db: { ...db, query } as Db, calls: sum };
}

describeEachBackend('re-reads of an idle daemon', (backend) => {
  const stops: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const stop of stops.splice(0)) await stop();
  });

  it('the embedded store counts the statements that may change data; PostgreSQL has no count', async () => {
    const db = await backend.open();
    if (backend.name !== 'embedded') return expect(db.writes).toBeUndefined();
    const writes = () => db.writes!();
    const acct = await createAccount(db, 'counted');
    let before = writes();
    // Reads, a read-only snapshot transaction, and statements that touched no row.
    await db.query('SELECT count(*) FROM usage_events');
    await db.transaction(async (tx) => {
      await tx.query('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY');
      await tx.query('SELECT 1');
    });
    await db.query(`UPDATE plans SET monthly_call_quota = 5 WHERE name = 'no such plan'`);
    expect(await claimDueDeliveries(db, 10, 60_000)).toEqual([]); // the alert outbox's poll, nothing due
    expect(writes()).toBe(before);

    await insertBatch(db, [makeEvent({ accountId: acct, time: new Date().toISOString() })]); // a SELECT over data-modifying CTEs
    expect(writes()).toBe(++before);
    await db.query(`UPDATE plans SET monthly_call_quota = 5 WHERE name = 'free'`);
    expect(writes()).toBe(++before);
    await db.query('TRUNCATE usage_tag_daily');
    expect(writes()).toBe(++before);
    await db.exec('CREATE TABLE scratch (a int); DROP TABLE scratch');
    expect(writes()).toBe(++before);
    // A statement that failed may still have been a write as far as the count can tell.
    await expect(db.query(`INSERT INTO accounts (name, plan) VALUES ('counted', 'pro')`)).rejects.toThrow();
    expect(writes()).toBe(++before);
  });

  it('stop while nothing is written, on the embedded store only; a write or a new month brings them back', async () => {
    const { db, calls } = counting(await backend.open());
    const acct = await createAccount(db, 'idle');
    const id = await setBudgetRow(db, acct, '10');
    let now = new Date();
    const monitor = new BudgetMonitor(db, silentLogger, { sweepMs: 20, now: () => now.getTime() });
    await monitor.start();
    stops.push(() => monitor.stop());

    // Half a second of 20 ms intervals with nothing written.
    const idle = { budget: calls('meter_budget_spend_') };
    await sleep(500);
    const read = { budget: calls('meter_budget_spend_') - idle.budget };
    if (backend.name === 'embedded') {
      // This process is the only writer: at most the one read after start-up's own writes.
      expect(read.budget).toBeLessThanOrEqual(1);
    } else {
      // Other sidecars write unseen: every interval reads (25 intervals; a loaded machine reads slower).
      expect(read.budget).toBeGreaterThanOrEqual(3);
    }

    // A write (spend, as the writer's rollup holds it) is read at the next interval.
    await seedSpend(db, acct, now.toISOString().slice(0, 10), '2.5');
    await waitFor(() => monitor.spendOf(id, now.getTime()) === 250_000_000n, 5_000, 'the spend written');

    // A new month reads again with nothing written: its spend starts at zero.
    const reads = calls('meter_budget_spend_');
    now = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 2));
    await waitFor(
      () =>
        monitor.states.get(id)?.window.start === Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1) &&
        monitor.spendOf(id, now.getTime()) === 0n,
      5_000,
      "the new month's spend",
    );
    expect(calls('meter_budget_spend_')).toBeGreaterThan(reads);
  });
});
