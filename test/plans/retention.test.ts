import { randomUUID } from 'node:crypto';
import { expect, it } from 'vitest';
import { runRetention } from '../../src/plans/retention.js';
import { openPostgres } from '../../src/store/postgres.js';
import type { Db } from '../../src/store/types.js';
import { createTestDatabase, describeEachBackend, postgresUrl } from '../helpers/stores.js';

const DAY = 86_400_000;

describeEachBackend('retention', (backend) => {
  let db: Db;
  const now = Date.now();

  const account = async (name: string, plan: string, changedDaysAgo: number) => {
    const [row] = await db.query<{ id: string }>(`INSERT INTO accounts (name, plan) VALUES ($1, $2) RETURNING id`, [
      name,
      plan,
    ]);
    await db.query(`UPDATE accounts SET plan_changed_at = $2 WHERE id = $1`, [
      row!.id,
      new Date(now - changedDaysAgo * DAY),
    ]);
    return row!.id;
  };
  const events = async (accountId: string, ages: number[]) => {
    for (const age of ages) {
      await db.query(
        `INSERT INTO usage_events (time, event_id, account_id, key_id, provider, model, status, price_version, usage_source, latency_ms, stream)
         VALUES ($1, $2, $3, 'aaaaaaaaaaaa', 'openai', 'gpt-4o', 200, 'v', 'provider', 1, false)`,
        [new Date(now - age * DAY), randomUUID(), accountId],
      );
    }
  };
  const ages = async (accountId: string) =>
    (
      await db.query<{ age: number }>(
        `SELECT round(extract(epoch FROM ($2::timestamptz - time)) / 86400)::int AS age FROM usage_events WHERE account_id = $1 ORDER BY 1`,
        [accountId, new Date(now)],
      )
    ).map((r) => r.age);

  it("deletes raw events past each plan's retention in batches, keeps rollups, and spares a fresh downgrade", async () => {
    db = await backend.open();
    const free = await account('free-old', 'free', 400);
    const pro = await account('pro-old', 'pro', 400);
    const downgraded = await account('just-downgraded', 'free', 2);
    await events(free, [1, 6, 8, 30, 31, 100]);
    await events(pro, [1, 8, 89, 91, 200]);
    await events(downgraded, [1, 8, 60]);
    const day = (n: number) => new Date(now - n * DAY).toISOString().slice(0, 10);
    await db.query(
      `INSERT INTO usage_daily (account_id, day, provider, model, requests) VALUES ($1, $2, 'openai', 'm', 1), ($1, $3, 'openai', 'm', 1)`,
      [free, day(30), day(450)],
    );

    // Claims of batch results go with the rollups: the 30-day-old one outlives its raw events.
    await db.query(
      `INSERT INTO usage_claims (account_id, claim, event_id, claimed_at) VALUES ($1, 'openai:file-a:m', $2, $3), ($1, 'openai:file-b:m', $4, $5)`,
      [free, randomUUID(), new Date(now - 30 * DAY), randomUUID(), new Date(now - 450 * DAY)],
    );

    const result = await runRetention(db, { batch: 2, now });
    expect(result).toEqual({ rawEvents: 6, rollupRows: 1, claims: 1 });
    expect(await ages(free)).toEqual([1, 6]);
    expect(await ages(pro)).toEqual([1, 8, 89]);
    expect(await ages(downgraded)).toEqual([1, 8, 60]); // the free plan is 2 days old for it
    // A month-old day survives in the rollups though its raw events are gone; 450 days does not.
    // (The free plan keeps 13 months before the current one: their first day is at most 428
    // days back, so 420 days can land on it, as it does on 25 November.)
    expect(await db.query(`SELECT day FROM usage_daily WHERE account_id = $1`, [free])).toEqual([{ day: day(30) }]);
    expect(await db.query(`SELECT claim FROM usage_claims WHERE account_id = $1`, [free])).toEqual([
      { claim: 'openai:file-a:m' },
    ]);
    expect(await runRetention(db, { batch: 2, now })).toEqual({ rawEvents: 0, rollupRows: 0, claims: 0 });
  }, 120_000); // opens the embedded store: a WASM start, slow on a loaded machine

  it('a deleted account (its events kept by meter accounts delete) is held to the shortest retention', async () => {
    const gone = await account('deleted-later', 'pro', 400);
    await events(gone, [1, 8, 30]);
    const day = (n: number) => new Date(now - n * DAY).toISOString().slice(0, 10);
    await db.query(
      `INSERT INTO usage_daily (account_id, day, provider, model, requests) VALUES ($1, $2, 'openai', 'm', 1)`,
      [gone, day(1)],
    );
    expect((await runRetention(db, { now }))!.rawEvents).toBe(0); // pro: 90 days
    await db.query('DELETE FROM accounts WHERE id = $1', [gone]);
    const result = await runRetention(db, { now });
    expect(result).toEqual({ rawEvents: 2, rollupRows: 0, claims: 0 }); // free's 7 days, the shortest
    expect(await ages(gone)).toEqual([1]);
    expect(await db.query(`SELECT day FROM usage_daily WHERE account_id = $1`, [gone])).toEqual([{ day: day(1) }]);
  }, 120_000);

  it('a plan change sets plan_changed_at', async () => {
    const id = await account('changer', 'pro', 100);
    await db.query(`UPDATE accounts SET plan = 'free' WHERE id = $1`, [id]);
    const [row] = await db.query<{ recent: boolean }>(
      `SELECT plan_changed_at > now() - interval '1 minute' AS recent FROM accounts WHERE id = $1`,
      [id],
    );
    expect(row!.recent).toBe(true);
  });
});

it.skipIf(!postgresUrl)('one sidecar at a time: a second runner skips while the first holds the lock', async () => {
  const url = await createTestDatabase();
  const a = openPostgres(url);
  const b = openPostgres(url);
  const { migrate } = await import('../../src/store/migrate.js');
  await migrate(a);
  try {
    let release!: () => void;
    const holding = a.withAdvisoryLock('meter.retention', () => new Promise<void>((r) => (release = r)));
    await new Promise((r) => setTimeout(r, 100));
    expect(await runRetention(b)).toBeUndefined();
    release();
    await holding;
    expect(await runRetention(b)).toEqual({ rawEvents: 0, rollupRows: 0, claims: 0 });
  } finally {
    await Promise.all([a.close(), b.close()]);
  }
});
