/** summary's budget fields, from the account budget (scope account, window month, zone UTC;
 *  CONTRACT §6) and the plan's hard cap. */
import { beforeAll, expect, it } from 'vitest';
import type { Db } from '../../src/store/types.js';
import { describeEachBackend } from '../helpers/stores.js';
import { createAccount, FixedKeys, startApi, type TestAccount, type TestApi } from './helpers/api.js';
import { makeEvent, seedEvents } from './helpers/seed.js';
import { setBudgetRow } from '../budget/helpers/seed.js';
import { createBudget } from '../../src/budget/budgets-admin.js';

describeEachBackend('analytics summary with budgets', (backend) => {
  let db: Db;
  let api: TestApi;
  let capped: TestAccount;
  let freeCapped: TestAccount;
  let unbudgeted: TestAccount;
  let created: TestAccount;

  beforeAll(async () => {
    db = await backend.open();
    const auth = new FixedKeys();
    capped = await createAccount(db, auth, 'pro');
    freeCapped = await createAccount(db, auth, 'free');
    unbudgeted = await createAccount(db, auth, 'pro');
    created = await createAccount(db, auth, 'pro');
    // The account budget made with `meter budgets create --scope account --window month --tz UTC`.
    await createBudget(db, created.principal.accountName, {
      amount: '40',
      scope: { kind: 'account', key: null, value: null },
      window: 'month',
      timezone: 'UTC',
      action: 'block',
    });
    // Budgets of another window or zone are not the account budget.
    await createBudget(db, unbudgeted.principal.accountName, { amount: '40', window: 'quarter' });
    await createBudget(db, unbudgeted.principal.accountName, { amount: '40', timezone: 'Europe/Berlin' });
    await setBudgetRow(db, capped.principal.accountId, '300.00000000', true);
    await setBudgetRow(db, freeCapped.principal.accountId, '3', true);
    await seedEvents(db, [
      makeEvent({ accountId: capped.principal.accountId, time: '2026-05-02T00:00:00Z', cost: '100.00000001' }),
      makeEvent({ accountId: capped.principal.accountId, time: '2026-04-30T23:59:59Z', cost: '500' }),
      makeEvent({ accountId: freeCapped.principal.accountId, time: '2026-05-03T00:00:00Z', cost: '2' }),
      makeEvent({ accountId: created.principal.accountId, time: '2026-05-04T00:00:00Z', cost: '10' }),
    ]);
    api = await startApi(db, auth, new Date('2026-05-14T12:00:00Z'));
  });

  it('reads the budget, its utilisation and the hard cap', async () => {
    const r = await api.get('/analytics/summary', capped.key);
    expect(r.body).toMatchObject({
      month: '2026-05',
      spend: '100.00000001',
      requests: '1',
      budget: '300',
      budget_utilization_pct: '33.33',
      hard_cap: true,
    });
    expect(r.text).toContain('"budget":300,"budget_utilization_pct":33.33,"hard_cap":true');
  });

  it('truncates the utilisation like `meter budget show`, and a plan without hard caps says false', async () => {
    const r = await api.get('/analytics/summary', freeCapped.key);
    expect(r.body).toMatchObject({ spend: '2', budget: '3', budget_utilization_pct: '66.66', hard_cap: false });
  });

  it('reads the account budget however it was made: `meter budgets create` with scope account, month, UTC', async () => {
    const r = await api.get('/analytics/summary', created.key);
    expect(r.body).toMatchObject({ spend: '10', budget: '40', budget_utilization_pct: '25', hard_cap: true });
  });

  it('an account without a budget says null and false', async () => {
    const r = await api.get('/analytics/summary', unbudgeted.key);
    expect(r.body).toMatchObject({ spend: '0', budget: null, budget_utilization_pct: null, hard_cap: false });
  });
});
