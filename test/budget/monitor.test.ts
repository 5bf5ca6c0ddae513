import { beforeAll, expect, it } from 'vitest';
import { DEFAULT_DELIVERER_OPTIONS, AlertDeliverer } from '../../src/alerts/deliverer.js';
import { setBudget, showBudget } from '../../src/budget/admin.js';
import { BudgetMonitor } from '../../src/budget/monitor.js';
import type { Db } from '../../src/store/types.js';
import { httpReceiver, type HttpReceiver } from '../alerts/helpers/receivers.js';
import { describeEachBackend } from '../helpers/stores.js';
import { addWebhook, createAccount, seedSpend, setBudgetRow, silentLogger } from './helpers/seed.js';

describeEachBackend('budget monitor', (backend) => {
  let db: Db;
  let now = new Date('2026-11-10T12:00:00Z');
  const clock = () => now.getTime();
  let acct: string;
  let id: string;
  let rx: HttpReceiver;
  const monitor = () => new BudgetMonitor(db, silentLogger, { sweepMs: 50, now: clock });
  const deliverAll = async () => {
    const d = new AlertDeliverer(db, silentLogger, { ...DEFAULT_DELIVERER_OPTIONS, pollMs: 25 });
    await d.deliverDue();
  };
  const levelsReceived = () => rx.received.map((r) => (JSON.parse(r.body) as { level: number }).level);
  const fired = async (m: BudgetMonitor) => (await m.refresh()).map(({ account, level }) => ({ account, level }));
  const show = (account: string) => showBudget(db, account, now);

  beforeAll(async () => {
    db = await backend.open();
    acct = await createAccount(db, 'jump');
    id = await setBudgetRow(db, acct, '100');
    rx = await httpReceiver();
    await addWebhook(db, acct, `${rx.url}/hook`);
  });

  it('one jump from 0 to 120% fires 50, 80 and 100 in order, once each', async () => {
    const m = monitor();
    expect(await m.refresh()).toEqual([]);
    expect(m.spendOf(id, clock())).toBe(0n);
    // Spend as the writer's rollups would hold it; last month's does not count.
    await seedSpend(db, acct, '2026-10-31', '1000');
    await seedSpend(db, acct, '2026-11-02', '100.25', { model: 'gpt-4o', requests: 40, tags: { team: 'search' } });
    await seedSpend(db, acct, '2026-11-03', '20.25', {
      provider: 'anthropic',
      model: 'claude-sonnet-4',
      requests: 3,
      tags: { team: 'ads' },
    });
    expect(await fired(m)).toEqual([50, 80, 100].map((level) => ({ account: 'jump', level })));
    expect(m.spendOf(id, clock())).toBe(12_050_000_000n);
    expect(await show('jump')).toMatchObject({
      account: 'jump',
      month: '2026-11',
      budget: '100',
      hard_cap: false,
      spend: '120.5',
      levels_fired: [50, 80, 100],
    });
    expect(await m.refresh()).toEqual([]);

    await deliverAll();
    expect(levelsReceived()).toEqual([50, 80, 100]);
    const bodies = rx.received.map((r) => JSON.parse(r.body) as Record<string, unknown>);
    expect(new Set(bodies.map((b) => b.id)).size).toBe(3);
    expect(bodies[2]).toMatchObject({
      type: 'budget.threshold',
      account: 'jump',
      month: '2026-11',
      budget_id: id,
      scope: { kind: 'account', key: null, value: null },
      window: 'month',
      timezone: 'UTC',
      level: 100,
      spend: 120.5,
      budget: 100,
      utilization_pct: 120.5,
      top_models: [
        { provider: 'openai', model: 'gpt-4o', spend: 100.25, requests: 40 },
        { provider: 'anthropic', model: 'claude-sonnet-4', spend: 20.25, requests: 3 },
      ],
      top_tags: [
        { key: 'team', value: 'search', spend: 100.25, requests: 40 },
        { key: 'team', value: 'ads', spend: 20.25, requests: 3 },
      ],
    });
  });

  it('a restarted monitor does not fire again', async () => {
    expect(await monitor().refresh()).toEqual([]);
    await deliverAll();
    expect(levelsReceived()).toEqual([50, 80, 100]);
  });

  it('raising the budget mid-month re-arms the levels above the new utilisation', async () => {
    // 120.5 of 200 is 60.25%: 80 and 100 fire again when reached, 50 stays fired.
    expect(await setBudget(db, 'jump', '200', false, now)).toEqual({ plan: 'pro', id, rearmed: [80, 100] });
    const m = monitor();
    expect(await m.refresh()).toEqual([]);
    expect((await show('jump')).levels_fired).toEqual([50]);
    await seedSpend(db, acct, '2026-11-09', '50'); // 170.5 of 200: 85.25%
    expect(await fired(m)).toEqual([{ account: 'jump', level: 80 }]);
    await deliverAll();
    expect(levelsReceived()).toEqual([50, 80, 100, 80]);
    expect(JSON.parse(rx.received[3]!.body)).toMatchObject({
      level: 80,
      spend: 170.5,
      budget: 200,
      utilization_pct: 85.25,
    });
  });

  it('a new month starts with no level fired', async () => {
    now = new Date('2026-12-01T00:00:05Z');
    const m = monitor();
    expect(await m.refresh()).toEqual([]);
    expect(await show('jump')).toMatchObject({ month: '2026-12', spend: '0', levels_fired: [] });
    await seedSpend(db, acct, '2026-12-01', '100');
    expect(await fired(m)).toEqual([{ account: 'jump', level: 50 }]);
    await deliverAll();
    expect(JSON.parse(rx.received.at(-1)!.body)).toMatchObject({ month: '2026-12', level: 50, spend: 100 });
  });

  it('tracks only budgeted accounts; the hard cap flag needs a plan that has it', async () => {
    const free = await createAccount(db, 'freebie', 'free');
    const none = await createAccount(db, 'no-budget', 'pro');
    const capped = await setBudgetRow(db, free, '10', true); // as if set before a downgrade to Free
    await seedSpend(db, none, '2026-12-01', '5');
    const m = monitor();
    await m.refresh();
    expect(m.book.get(capped)).toMatchObject({ action: 'block', enforced: false, amountUnits: 1_000_000_000n });
    expect(m.spendOf(capped, clock())).toBe(0n);
    expect(await show('freebie')).toMatchObject({ budget: '10', hard_cap: false, spend: '0' });
    expect(m.book.of(none)).toEqual([]);
    expect(await show('no-budget')).toMatchObject({ budget: null, spend: '5' });
  });
});
