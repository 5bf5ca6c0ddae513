/** summary's budget fields, from the budgets table (sql/004) and the plan's hard cap. */
import { beforeAll, expect, it } from 'vitest';
import type { Db } from '../../src/store/types.js';
import { describeEachBackend } from '../helpers/stores.js';
import { createAccount, FixedKeys, startApi, type TestAccount, type TestApi } from './helpers/api.js';
import { makeEvent, seedEvents } from './helpers/seed.js';

describeEachBackend('analytics summary with budgets', (backend) => {
  let db: Db;
  let api: TestApi;
  let capped: TestAccount;
  let freeCapped: TestAccount;
  let unbudgeted: TestAccount;

  beforeAll(async () => {
    db = await backend.open();
    const auth = new FixedKeys();
    capped = await createAccount(db, auth, 'pro');
    freeCapped = await createAccount(db, auth, 'free');
    unbudgeted = await createAccount(db, auth, 'pro');
    const budget = 'INSERT INTO budgets (account_id, monthly_usd, hard_cap) VALUES ($1, $2, true)';
    await db.query(budget, [capped.principal.accountId, '300.00000000']);
    await db.query(budget, [freeCapped.principal.accountId, '3']);
    await seedEvents(db, [
      makeEvent({ accountId: capped.principal.accountId, time: '2026-05-02T00:00:00Z', cost: '100.00000001' }),
      makeEvent({ accountId: capped.principal.accountId, time: '2026-04-30T23:59:59Z', cost: '500' }),
      makeEvent({ accountId: freeCapped.principal.accountId, time: '2026-05-03T00:00:00Z', cost: '2' }),
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

  it('an account without a budget says null and false', async () => {
    const r = await api.get('/analytics/summary', unbudgeted.key);
    expect(r.body).toMatchObject({ spend: '0', budget: null, budget_utilization_pct: null, hard_cap: false });
  });
});
