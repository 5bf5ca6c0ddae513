/**
 * summary's budget fields once a `budgets` table exists (it arrives with the budgets feature;
 * this test creates the shape budget-source.ts expects, so a different shape fails here first).
 */
import { beforeAll, expect, it } from 'vitest';
import type { Db } from '../../src/store/types.js';
import { describeEachBackend } from '../helpers/stores.js';
import { createAccount, FixedKeys, startApi, type TestAccount, type TestApi } from './helpers/api.js';
import { makeEvent, seedEvents } from './helpers/seed.js';

describeEachBackend('analytics summary with budgets', (backend) => {
  let db: Db;
  let api: TestApi;
  let capped: TestAccount;
  let unbudgeted: TestAccount;

  beforeAll(async () => {
    db = await backend.open();
    const auth = new FixedKeys();
    capped = await createAccount(db, auth, 'pro');
    unbudgeted = await createAccount(db, auth, 'pro');
    await db.exec(`CREATE TABLE IF NOT EXISTS budgets (
      account_id uuid PRIMARY KEY REFERENCES accounts (id), monthly_usd numeric(20,8) NOT NULL, hard_cap boolean NOT NULL DEFAULT false)`);
    await db.query('INSERT INTO budgets (account_id, monthly_usd, hard_cap) VALUES ($1, $2, true)', [capped.principal.accountId, '300.00000000']);
    await seedEvents(db, [
      makeEvent({ accountId: capped.principal.accountId, time: '2026-05-02T00:00:00Z', cost: '100.00000001' }),
      makeEvent({ accountId: capped.principal.accountId, time: '2026-04-30T23:59:59Z', cost: '500' }),
    ]);
    api = await startApi(db, auth, new Date('2026-05-14T12:00:00Z'));
  });

  it('reads the budget, its utilisation (2 decimals) and hard cap', async () => {
    const r = await api.get('/analytics/summary', capped.key);
    expect(r.body).toMatchObject({ month: '2026-05', spend: '100.00000001', requests: '1', budget: '300', budget_utilization_pct: '33.33', hard_cap: true });
    expect(r.text).toContain('"budget":300,"budget_utilization_pct":33.33,"hard_cap":true');
  });

  it('an account without a budget still says null and false', async () => {
    const r = await api.get('/analytics/summary', unbudgeted.key);
    expect(r.body).toMatchObject({ spend: '0', budget: null, budget_utilization_pct: null, hard_cap: false });
  });
});
