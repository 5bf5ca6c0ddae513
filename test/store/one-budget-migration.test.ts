import { describe, expect, it } from 'vitest';
import { summary } from '../../src/analytics/rollup-queries.js';
import { showBudget } from '../../src/budget/admin.js';
import { listBudgets } from '../../src/budget/budgets-admin.js';
import { BudgetMonitor } from '../../src/budget/monitor.js';
import { stringifyJson } from '../../src/money.js';
import { openEmbedded } from '../../src/store/embedded.js';
import { openStore } from '../../src/store/index.js';
import { loadMigrations, migrate, migrateLocked, MIGRATE_LOCK } from '../../src/store/migrate.js';
import { openPostgres } from '../../src/store/postgres.js';
import { refreshAggregates } from '../../src/store/timescale/maintenance.js';
import { chooseMode, inTimescaleMode } from '../../src/store/timescale/mode.js';
import type { Db, StoreKind } from '../../src/store/types.js';
import { makeEvent, seedEvents } from '../analytics/helpers/seed.js';
import { createAccount, silentLogger } from '../budget/helpers/seed.js';
import { atFileEnd } from '../helpers/cleanup.js';
import { createTestDatabase, postgresUrl, tempDir } from '../helpers/stores.js';
import { closeOnEngine, openOnEngine, timescaleDatabase } from '../helpers/timescale.js';

/** sql/170: the account budget of sql/004 (table budgets, levels in alert_levels_fired) moves in
 *  place into the one budget model, on every store, as a database upgraded by `meter start`. */
const ONE_MODEL = 170;
const before = (kind: StoreKind) => loadMigrations(undefined, kind).filter((m) => m.version < ONE_MODEL);

/** A store of each kind migrated up to just before sql/170, and how the daemon then opens it. */
const stores: { name: StoreKind; skip?: boolean; old(): Promise<{ db: Db; upgrade(): Promise<Db> }> }[] = [
  {
    name: 'embedded',
    async old() {
      const dir = tempDir();
      const db = await openEmbedded(dir, { template: false }); // the template is migrated to the end
      await migrate(db, before('embedded'));
      return {
        db,
        upgrade: async () => {
          await db.close();
          const next = await openStore({ databaseUrl: undefined, dataDir: dir });
          atFileEnd(() => next.close());
          return next;
        },
      };
    },
  },
  {
    name: 'postgres',
    skip: !postgresUrl,
    async old() {
      const url = await createTestDatabase();
      const db = openPostgres(url);
      await migrate(db, before('postgres'));
      return {
        db,
        upgrade: async () => {
          await db.close();
          const next = await openStore({ databaseUrl: url, dataDir: tempDir() });
          atFileEnd(() => next.close());
          return next;
        },
      };
    },
  },
  {
    name: 'timescale',
    async old() {
      const url = await timescaleDatabase();
      const db = inTimescaleMode(openPostgres(url, { max: 1 }));
      await db.withAdvisoryLock(MIGRATE_LOCK, async (conn) => {
        expect(await chooseMode(conn, { store: 'timescale' })).toBe('timescale');
        await migrateLocked(conn, 'timescale', before('timescale'));
      });
      return {
        db,
        upgrade: async () => {
          await closeOnEngine(db, url);
          const next = await openOnEngine({ databaseUrl: url, dataDir: tempDir() });
          if (next.kind !== 'timescale') throw new Error(`reopened in ${next.kind} mode`);
          atFileEnd(() => next.close());
          return next;
        },
      };
    },
  },
];

const now = new Date();
const month = now.toISOString().slice(0, 7);
const lastMonth = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() - 1, 1)).toISOString().slice(0, 7);
const monthStart = `${month}-01T00:00:00.000Z`;
const hexOf = (uuid: string) => uuid.replace(/-/g, '').slice(0, 12);

for (const store of stores) {
  describe.skipIf(store.skip)(`the one budget model migration [${store.name}]`, () => {
    // The embedded store runs initdb and every migration here (no template): slow under load.
    it(
      'moves account budgets and their fired levels in place: 50% fired before does not fire again',
      { timeout: 120_000 },
      async () => {
        const { db: old, upgrade } = await store.old();
        const capped = await createAccount(old, 'capped', 'pro');
        const plain = await createAccount(old, 'plain', 'pro');
        const cleared = await createAccount(old, 'cleared', 'pro');
        await old.query(
          `INSERT INTO budgets (account_id, monthly_usd, hard_cap) VALUES ($1, 100, true), ($2, 10, false)`,
          [capped, plain],
        );
        const fire = (account: string, m: string, level: number, budget = '100') =>
          old.query(
            `INSERT INTO alert_levels_fired (account_id, month, level, event_id, spend, budget)
           VALUES ($1, $2, $3::smallint, gen_random_uuid(), $4::numeric * $3::smallint / 100, $4::numeric)`,
            [account, m, level, budget],
          );
        await fire(capped, month, 50);
        for (const level of [50, 80, 100]) await fire(capped, lastMonth, level);
        await fire(cleared, month, 50); // its budget was cleared: nothing to move
        // `budgets create` with its defaults made a second account/month/UTC budget of `plain`.
        await old.query(
          `INSERT INTO scoped_budgets (id, account_id, scope_kind, amount, levels) VALUES ('aaaaaaaaaaaa', $1, 'account', 5, '{90}')`,
          [plain],
        );

        const db = await upgrade();
        const rows = await db.query(
          `SELECT id, account_id, scope_kind, window_kind, timezone, amount::text AS amount, levels::int[] AS levels,
                action, strict FROM budgets ORDER BY budgets.amount DESC`,
        );
        expect(rows).toEqual([
          {
            id: hexOf(capped),
            account_id: capped,
            scope_kind: 'account',
            window_kind: 'month',
            timezone: 'UTC',
            amount: '100.00000000',
            levels: [50, 80, 100],
            action: 'block',
            strict: false,
          },
          expect.objectContaining({ id: hexOf(plain), timezone: 'UTC', amount: '10.00000000', action: 'alert' }),
          // kept, counting as before, no longer a second account budget
          expect.objectContaining({ id: 'aaaaaaaaaaaa', timezone: 'Etc/UTC', amount: '5.00000000', levels: [90] }),
        ]);
        const fired = await db.query<{ budget_id: string; window_start: Date; level: number }>(
          `SELECT budget_id, window_start, level FROM budget_levels_fired ORDER BY window_start, level`,
        );
        expect(fired.map((f) => [f.budget_id, new Date(f.window_start).toISOString().slice(0, 7), f.level])).toEqual([
          ...[50, 80, 100].map((l) => [hexOf(capped), lastMonth, l]),
          [hexOf(capped), month, 50],
        ]);
        const gone = await db.query(
          `SELECT to_regclass('alert_levels_fired') AS a, to_regclass('scoped_budgets') AS s, to_regclass('budget_definitions') AS v`,
        );
        expect(gone).toEqual([{ a: null, s: null, v: null }]);

        // The shorthand, the list and the summary read that one budget.
        expect(await showBudget(db, 'capped', now)).toMatchObject({
          budget: '100',
          hard_cap: true,
          levels_fired: [50],
        });
        expect((await listBudgets(db, 'capped')).map((b) => b.id)).toEqual([hexOf(capped)]);

        // 60%: 50 fired before the upgrade does not fire again; 85%: 80 fires, once.
        const monitor = new BudgetMonitor(db, silentLogger, { sweepMs: 60_000 });
        const spend = async (cost: string) => {
          await seedEvents(db, [
            makeEvent({ accountId: capped, time: new Date(Date.now() - 1000).toISOString(), cost }),
          ]);
          if (db.kind === 'timescale') await refreshAggregates(db, { from: new Date(monthStart) });
        };
        await spend('60');
        expect(await monitor.refresh()).toEqual([]);
        await spend('25');
        expect(await monitor.refresh()).toEqual([{ budget: hexOf(capped), account: 'capped', level: 80 }]);
        expect(await monitor.refresh()).toEqual([]);
        expect((await showBudget(db, 'capped', now)).levels_fired).toEqual([50, 80]);
        expect(JSON.parse(stringifyJson(await summary(db, capped, now)))).toMatchObject({
          budget: 100,
          budget_utilization_pct: 85,
          hard_cap: true,
        });
      },
    );
  });
}
