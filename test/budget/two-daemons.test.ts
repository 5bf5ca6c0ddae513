import { describe, expect, it } from 'vitest';
import { createAlertDeliverer } from '../../src/alerts/index.js';
import { createBudgetMonitor } from '../../src/budget/index.js';
import { BudgetMonitor } from '../../src/budget/monitor.js';
import { loadConfig } from '../../src/config.js';
import type { Compose } from '../../src/component.js';
import { startDaemon, type Daemon } from '../../src/server/daemon.js';
import { migrate } from '../../src/store/migrate.js';
import { openPostgres } from '../../src/store/postgres.js';
import { httpReceiver, waitFor, type HttpReceiver } from '../alerts/helpers/receivers.js';
import { createTestDatabase, postgresUrl, tempDir } from '../helpers/stores.js';
import { addWebhook, createAccount, seedSpend, setBudgetRow, silentLogger } from './helpers/seed.js';

const levels = (rx: HttpReceiver) => rx.received.map((r) => (JSON.parse(r.body) as { level: number }).level);
const today = () => new Date().toISOString().slice(0, 10);

describe.skipIf(!postgresUrl)('budgets and alerts with two daemons on one PostgreSQL database', () => {
  it('send each level once to each channel, and a restart sends nothing again', async () => {
    const databaseUrl = await createTestDatabase();
    const config = loadConfig({
      DATABASE_URL: databaseUrl,
      METER_PORT: '0',
      METER_FLUSH_INTERVAL_MS: '20',
      METER_DATA_DIR: tempDir(),
    });
    // The daemon's own two components, with a fast outbox poll; nothing else is needed here.
    const factories: Compose = async (ctx, start) => {
      await start(createBudgetMonitor(ctx, undefined, { sweepMs: 20 }));
      await start(createAlertDeliverer(ctx, undefined, { pollMs: 20 }));
    };
    const daemons: Daemon[] = [];
    const db = openPostgres(databaseUrl);
    try {
      daemons.push(
        await startDaemon(config, silentLogger, factories),
        await startDaemon(config, silentLogger, factories),
      );
      const acct = await createAccount(db, 'fleet');
      await setBudgetRow(db, acct, '100');
      const a = await httpReceiver();
      const b = await httpReceiver();
      await addWebhook(db, acct, `${a.url}/one`);
      await addWebhook(db, acct, `${b.url}/two`);
      // Spend grows while both daemons race to notice: 30, 55, 85, then a jump to 130.
      for (const step of ['30', '25', '30', '45']) {
        await seedSpend(db, acct, today(), step);
        await new Promise((r) => setTimeout(r, 60));
      }
      await waitFor(() => a.received.length >= 3 && b.received.length >= 3, 15_000, 'three alerts on both channels');
      await new Promise((r) => setTimeout(r, 300)); // a duplicate would arrive by now

      expect(levels(a)).toEqual([50, 80, 100]);
      expect(levels(b)).toEqual([50, 80, 100]);
      expect(a.received.map((r) => r.headers['meter-event-id'])).toEqual(
        b.received.map((r) => r.headers['meter-event-id']),
      );
      const fired = await db.query<{ level: number }>('SELECT level FROM budget_levels_fired ORDER BY level');
      expect(fired.map((f) => f.level)).toEqual([50, 80, 100]);

      // Restart: both stop, a new daemon starts on the same database and finds nothing to send.
      for (const d of daemons.splice(0)) await d.close();
      daemons.push(await startDaemon(config, silentLogger, factories));
      await new Promise((r) => setTimeout(r, 300));
      expect(a.received).toHaveLength(3);
      expect(b.received).toHaveLength(3);
      const statuses = await db.query<{ status: string; n: number }>(
        'SELECT status, count(*)::int AS n FROM alert_deliveries GROUP BY status',
      );
      expect(statuses).toEqual([{ status: 'delivered', n: 6 }]);
    } finally {
      for (const d of daemons) await d.close();
      await db.close();
    }
  });

  it('two monitors that see the same crossing at the same moment fire each level once', async () => {
    const databaseUrl = await createTestDatabase();
    const one = openPostgres(databaseUrl);
    const two = openPostgres(databaseUrl);
    try {
      await migrate(one);
      const acct = await createAccount(one, 'race');
      await setBudgetRow(one, acct, '10');
      await addWebhook(one, acct, 'http://127.0.0.1:9/never-called');
      await seedSpend(one, acct, today(), '13');
      const [x, y] = await Promise.all([
        new BudgetMonitor(one, silentLogger, { sweepMs: 50 }).refresh(),
        new BudgetMonitor(two, silentLogger, { sweepMs: 50 }).refresh(),
      ]);
      expect([...x, ...y].map((f) => f.level).sort((p, q) => p - q)).toEqual([50, 80, 100]);
      const queued = await one.query<{ n: number }>('SELECT count(*)::int AS n FROM alert_deliveries');
      expect(queued).toEqual([{ n: 3 }]);
    } finally {
      await one.close();
      await two.close();
    }
  });
});
