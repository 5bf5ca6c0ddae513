/**
 * Alerts of budgets of any scope: each level once per budget and window across two daemons on
 * one PostgreSQL database; and, with a fixed clock, the window boundary of a day in
 * America/New_York on the day its clocks fall back (a 25-hour day), where the next window
 * starts with no level fired.
 */
import { describe, expect, it } from 'vitest';
import { createAlertDeliverer } from '../../src/alerts/index.js';
import { createBudget, updateBudget } from '../../src/budget/budgets-admin.js';
import { createBudgetMonitor } from '../../src/budget/index.js';
import { BudgetMonitor } from '../../src/budget/monitor.js';
import { ChangeWatcher } from '../../src/pulse/changes.js';
import { parseScope } from '../../src/budget/scope.js';
import type { Compose } from '../../src/component.js';
import { loadConfig } from '../../src/config.js';
import { startDaemon, type Daemon } from '../../src/server/daemon.js';
import { migrate } from '../../src/store/migrate.js';
import { openPostgres } from '../../src/store/postgres.js';
import { makeEvent, seedEvents } from '../analytics/helpers/seed.js';
import { httpReceiver, waitFor } from '../alerts/helpers/receivers.js';
import { atFileEnd } from '../helpers/cleanup.js';
import { createTestDatabase, postgresUrl, tempDir } from '../helpers/stores.js';
import { addWebhook, createAccount, silentLogger } from './helpers/seed.js';

describe.skipIf(!postgresUrl)('alerts of budgets of any scope', () => {
  it('two daemons: each level of a tag budget in Asia/Kathmandu fires once, on every channel', async () => {
    const databaseUrl = await createTestDatabase();
    const config = loadConfig({
      DATABASE_URL: databaseUrl,
      METER_PORT: '0',
      METER_FLUSH_INTERVAL_MS: '20',
      METER_DATA_DIR: tempDir(),
    });
    // The daemon's pulse, fast, with the account served (its events are seeded below).
    const factories: Compose = async (ctx, start) => {
      const changes = new ChangeWatcher(ctx.store, silentLogger, 50);
      changes.served.touch(acct);
      await start(createBudgetMonitor(ctx, changes));
      await start(createAlertDeliverer(ctx, changes, { pollMs: 20 }));
      await start(changes);
    };
    const db = openPostgres(databaseUrl);
    atFileEnd(() => db.close());
    await migrate(db);
    const acct = await createAccount(db, 'fleet');
    const budget = await createBudget(db, 'fleet', {
      amount: '1',
      scope: parseScope('tag:team=search'),
      window: 'day',
      timezone: 'Asia/Kathmandu',
      levels: [25, 75, 100],
    });
    const a = await httpReceiver();
    const b = await httpReceiver();
    await addWebhook(db, acct, `${a.url}/one`);
    await addWebhook(db, acct, `${b.url}/two`);
    const daemons: Daemon[] = [];
    try {
      daemons.push(
        await startDaemon(config, silentLogger, factories),
        await startDaemon(config, silentLogger, factories),
      );
      // Spend of the tag grows while both daemons race to notice; another team's calls do not count.
      for (const cost of ['0.3', '0.2', '0.3', '0.45']) {
        const time = new Date().toISOString();
        await seedEvents(db, [
          makeEvent({ accountId: acct, time, cost, tags: { team: 'search' } }),
          makeEvent({ accountId: acct, time, cost: '5', model: 'gpt-4o', tags: { team: 'ads' } }),
        ]);
        await new Promise((r) => setTimeout(r, 60));
      }
      const levels = (rx: typeof a) => rx.received.map((r) => (JSON.parse(r.body) as { level: number }).level);
      await waitFor(() => a.received.length >= 3 && b.received.length >= 3, 15_000, 'three alerts on both channels');
      await new Promise((r) => setTimeout(r, 300)); // a duplicate would arrive by now
      expect(levels(a)).toEqual([25, 75, 100]);
      expect(levels(b)).toEqual([25, 75, 100]);
      expect(a.received.map((r) => r.headers['meter-event-id'])).toEqual(
        b.received.map((r) => r.headers['meter-event-id']),
      );
      const body = JSON.parse(a.received[2]!.body) as Record<string, unknown>;
      expect(body).toMatchObject({
        budget_id: budget.id,
        scope: { kind: 'tag', key: 'team', value: 'search' },
        window: 'day',
        timezone: 'Asia/Kathmandu',
        spend: 1.25,
        budget: 1,
        utilization_pct: 125,
      });
      expect(String(body.window_start)).toMatch(/T00:00:00\+05:45$/);
      // What the budget's spend was made of: its own scope and window, not the whole account's.
      expect(body.top_models).toEqual([{ provider: 'openai', model: 'gpt-4o-mini', spend: 1.25, requests: 4 }]);
      expect(body.top_tags).toEqual([{ key: 'team', value: 'search', spend: 1.25, requests: 4 }]);
      const fired = await db.query<{ level: number }>(
        'SELECT level::int AS level FROM budget_levels_fired WHERE budget_id = $1 ORDER BY level',
        [budget.id],
      );
      expect(fired.map((f) => f.level)).toEqual([25, 75, 100]);
    } finally {
      for (const d of daemons) await d.close();
    }
  });

  it('a fixed clock across the window boundary of a 25-hour day (America/New_York, fall back)', async () => {
    const db = openPostgres(await createTestDatabase());
    atFileEnd(() => db.close());
    await migrate(db);
    const acct = await createAccount(db, 'clock');
    const budget = await createBudget(db, 'clock', {
      amount: '1',
      window: 'day',
      timezone: 'America/New_York',
      levels: [50],
    });
    // 1 November 2026 in New York runs from 04:00Z (EDT) to 05:00Z the next day (EST).
    await seedEvents(db, [
      makeEvent({ accountId: acct, time: '2026-11-01T03:59:59.999Z', cost: '7' }), // 31 October
      makeEvent({ accountId: acct, time: '2026-11-01T04:00:00.000Z', cost: '0.25' }),
      makeEvent({ accountId: acct, time: '2026-11-02T04:59:59.999Z', cost: '0.25000001' }), // 23:59:59 EST
      makeEvent({ accountId: acct, time: '2026-11-02T05:00:00.000Z', cost: '0.6' }), // 2 November
    ]);
    let now = Date.parse('2026-11-01T12:00:00Z');
    const monitor = new BudgetMonitor(db, silentLogger, { sweepMs: 30_000, now: () => now });
    // The pulses the daemon would hear: after a change (budget updated), and with nothing new.
    const pulse = (changed: boolean) => monitor.pulse({ changed, dirty: new Set(), alertsDue: false });
    await pulse(true);
    expect(monitor.states.get(budget.id)?.spendUnits).toBe(50_000_001n);
    const firstEvent = async () =>
      (await db.query<{ event_id: string }>('SELECT event_id FROM budget_levels_fired'))[0]?.event_id;
    const first = await firstEvent();
    expect(first).toBeDefined();
    // Raised, the level re-arms (25% now); lowered back, it fires again in the same window.
    await updateBudget(db, budget.id, { amount: '2' }, now);
    await pulse(true);
    expect(await firstEvent()).toBeUndefined();
    await updateBudget(db, budget.id, { amount: '1' }, now);
    await pulse(true);
    expect(await firstEvent()).not.toBe(first);
    expect(await firstEvent()).toBeDefined();
    now = Date.parse('2026-11-02T04:59:59Z');
    await pulse(false);
    now = Date.parse('2026-11-02T05:00:00Z');
    await pulse(false);
    expect(monitor.states.get(budget.id)?.spendUnits).toBe(60_000_000n);
    const fired = await db.query<{ window_start: Date; level: number; spend: string }>(
      'SELECT window_start, level::int AS level, spend::text AS spend FROM budget_levels_fired ORDER BY window_start',
    );
    expect(fired.map((f) => [f.window_start.toISOString(), f.level, f.spend])).toEqual([
      ['2026-11-01T04:00:00.000Z', 50, '0.50000001'],
      ['2026-11-02T05:00:00.000Z', 50, '0.60000000'],
    ]);
  });
});
