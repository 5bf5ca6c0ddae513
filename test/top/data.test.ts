import { beforeAll, expect, it } from 'vitest';
import { TopData } from '../../cli/top/data.js';
import { sourceFromDb } from '../../cli/top-source.js';
import type { Db } from '../../src/store/types.js';
import { checkParams, TOP_STATEMENTS } from '../../src/top/statements.js';
import { makeEvent, seedEvents } from '../analytics/helpers/seed.js';
import { setBudgetRow } from '../budget/helpers/seed.js';
import { describeEachBackend } from '../helpers/stores.js';

/** m minutes ago, but not before this month began: the month's figures count calls by when they
 *  began, and in a month's first minutes "2 minutes ago" is last month. (The window and the
 *  tail go by when calls were recorded: now, either way.) */
const minutesAgo = (m: number) => {
  const now = new Date();
  return new Date(
    Math.max(now.getTime() - m * 60_000, Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1)),
  ).toISOString();
};

describeEachBackend(
  'meter top data',
  (backend) => {
    let db: Db;
    let acme: string;
    beforeAll(async () => {
      db = await backend.open();
      const rows = await db.query<{ id: string; name: string }>(
        "INSERT INTO accounts (name, plan) VALUES ('acme', 'pro'), ('zeta', 'free') RETURNING id::text AS id, name",
      );
      acme = rows.find((r) => r.name === 'acme')!.id;
      await setBudgetRow(db, acme, '10', true);
      await seedEvents(db, [
        makeEvent({ accountId: acme, time: minutesAgo(2), cost: '0.10000000', tags: { team: 'search', env: 'prod' } }),
        makeEvent({ accountId: acme, time: minutesAgo(1), cost: '0.20000000', tags: { team: 'ads' }, model: 'gpt-4o' }),
        makeEvent({ accountId: acme, time: minutesAgo(1), cost: '0.00000001', usageSource: 'estimated', status: 500 }),
      ]);
    });

    it('starts on the named account with the month, the tail and the window', async () => {
      const top = new TopData(sourceFromDb(db), { account: 'acme', intervalS: 1 });
      await top.start();
      const f = await top.refresh();
      expect(f.accounts).toEqual(['acme', 'zeta']);
      expect(f.month).toMatchObject({
        spend: '0.30000001',
        requests: '3',
        budget: '10',
        utilization_pct: '3',
        hard_cap: 'on',
      });
      expect(f.tail.map((t) => t.cost).sort()).toEqual(['0.00000001', '0.1', '0.2']);
      expect(f.window).toMatchObject({ calls: 3, error_rate_pct: 33.3, estimated_pct: 33.3, unpriced_pct: 0 });
      expect(f.spend_per_minute.reduce((a, b) => a + Number(b) * 1e8, 0)).toBe(30_000_001); // recorded this minute
      expect(f.by_model[0]).toEqual({ provider: 'openai', model: 'gpt-4o', spend: '0.2', requests: '1' });
      // the key with the most spend first (team $0.3, env $0.1), not the first by name
      expect(f.by_tag.keys).toEqual(['team', 'env']);
      expect(f.by_tag.key).toBe('team');
      expect(f.by_tag.groups.map((x) => x.value)).toEqual(['ads', 'search', null]);
      top.nextTagKey();
      const g = await top.refresh();
      expect(g.by_tag.key).toBe('env');
      expect(g.by_tag.groups).toEqual([
        { value: null, spend: '0.20000001', requests: '2' },
        { value: 'prod', spend: '0.1', requests: '1' },
      ]);
      // an account created after meter top started joins the `a` cycle
      await db.query("INSERT INTO accounts (name, plan) VALUES ('mid', 'free')");
      await top.nextAccount();
      const mid = await top.refresh();
      expect(mid.account).toBe('mid');
      expect(mid.accounts).toEqual(['acme', 'mid', 'zeta']);
      await top.nextAccount();
      expect((await top.refresh()).account).toBe('zeta');
      await top.nextAccount();
      expect((await top.refresh()).account).toBe('acme');
    });

    it('picks up new calls by cursor, slow ones included, each once', async () => {
      const top = new TopData(sourceFromDb(db), { account: 'acme', intervalS: 1 });
      await top.start();
      const before = await top.refresh();
      // A call that arrived 5 minutes ago and ended now is recorded now: the cursor still sees it.
      await seedEvents(db, [
        makeEvent({ accountId: acme, time: minutesAgo(5), cost: '1.00000000', latencyMs: 300_000 }),
        makeEvent({ accountId: acme, time: minutesAgo(0), cost: '0.50000000' }),
      ]);
      const after = await top.refresh();
      expect(after.window.calls).toBe(before.window.calls + 2);
      expect(
        after.tail
          .slice(0, 2)
          .map((t) => t.cost)
          .sort(),
      ).toEqual(['0.5', '1']);
      expect(after.window.p95_ms).toBe(300_000);
      const sum = (f: typeof after) => f.spend_per_minute.reduce((a, b) => a + BigInt(Math.round(Number(b) * 1e8)), 0n);
      expect(sum(after) - sum(before)).toBe(150_000_000n);
      const again = await top.refresh();
      expect(sum(again)).toBe(sum(after)); // nothing counted twice
      expect(again.window.calls).toBe(after.window.calls);
      expect(BigInt(again.month.requests)).toBe(BigInt(before.month.requests) + 2n);
    });

    it('names an unknown account', async () => {
      const top = new TopData(sourceFromDb(db), { account: 'nope', intervalS: 1 });
      await expect(top.start()).rejects.toThrow('--account "nope": no such account');
    });
  },
  { timescale: true },
);

it('checks statement parameters against their kinds', () => {
  const s = TOP_STATEMENTS['top.events_since'];
  expect(checkParams(s, ['00000000-0000-0000-0000-000000000000', '1', [], 10])).toBeUndefined();
  expect(checkParams(s, ["x' OR 1=1", '1', [], 10])).toBe('parameter $1 must be a uuid');
  expect(checkParams(s, ['00000000-0000-0000-0000-000000000000', '1', ['nope'], 10])).toBe(
    'parameter $3 must be a uuid[]',
  );
  expect(checkParams(s, [])).toBe('expected 4 parameters, got 0');
});
