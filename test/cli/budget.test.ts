import { beforeAll, expect, it } from 'vitest';
import type { StoreRunner } from '../../cli/commands/budget.js';
import { BudgetMonitor } from '../../src/budget/monitor.js';
import type { Db } from '../../src/store/types.js';
import { cliStore, runCli } from '../alerts/helpers/cli.js';
import { createAccount, seedSpend, silentLogger } from '../budget/helpers/seed.js';
import { describeEachBackend } from '../helpers/stores.js';

const month = new Date().toISOString().slice(0, 7);
const today = new Date().toISOString().slice(0, 10);

describeEachBackend('meter budget', (backend) => {
  let db: Db;
  let run: StoreRunner;
  let acme: string;
  const meter = (...args: string[]) => runCli(args, run);

  beforeAll(async () => {
    ({ db, run } = await cliStore(backend));
    acme = await createAccount(db, 'acme', 'pro');
    await createAccount(db, 'free-co', 'free');
    await seedSpend(db, acme, today, '12.34567891');
  });

  it('set, then show --json with exact money and month-to-date spend', async () => {
    expect(await meter('budget', 'set', '--account', 'acme', '--monthly', '250.50')).toEqual({
      code: 0,
      stdout: 'budget of acme: $250.5 a month\n',
      stderr: '',
    });
    const shown = await meter('budget', 'show', '--account', 'acme', '--json');
    expect(shown.code).toBe(0);
    expect(shown.stdout).toBe(
      `{"account":"acme","month":"${month}","budget":250.5,"hard_cap":false,"spend":12.34567891,"utilization_pct":4.92,"levels_fired":[]}\n`,
    );
    const text = await meter('budget', 'show', '--account', 'acme');
    expect(text.stdout).toContain('budget   $250.5 a month');
    expect(text.stdout).toContain('spend    $12.34567891 (4.92%)');
  });

  it('refuses bad amounts, naming what is allowed', async () => {
    for (const bad of ['abc', '0', '0.000000001', '1e3', '1234567890123', '12,5']) {
      const r = await meter('budget', 'set', '--account', 'acme', '--monthly', bad);
      expect(r.code).toBe(2); // a usage error
      expect(r.stderr).toBe(
        `meter: --monthly "${bad}" is invalid: expected a USD amount greater than 0, ` +
          'at most 12 digits before the point and 8 after (e.g. 250 or 99.5)\n',
      );
    }
    expect(JSON.parse((await meter('budget', 'show', '--account', 'acme', '--json')).stdout).budget).toBe(250.5);
  });

  it('--hard-cap is refused on the Free plan with a clear message, and accepted on Pro', async () => {
    const refused = await meter('budget', 'set', '--account', 'free-co', '--monthly', '10', '--hard-cap');
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(
      /^meter: --hard-cap is not available on the free plan of account "free-co": it needs a plan with a hard cap/,
    );
    expect(refused.stderr.trim().split('\n')).toHaveLength(1);
    expect(JSON.parse((await meter('budget', 'show', '--account', 'free-co', '--json')).stdout)).toMatchObject({
      budget: null,
      hard_cap: false,
      utilization_pct: null,
    });
    expect((await meter('budget', 'set', '--account', 'free-co', '--monthly', '10')).code).toBe(0);

    const pro = await meter('budget', 'set', '--account', 'acme', '--monthly', '250.5', '--hard-cap', '--json');
    expect(JSON.parse(pro.stdout)).toMatchObject({ budget: 250.5, hard_cap: true });
  });

  it('a new amount keeps the hard cap as it is; only --no-hard-cap turns it off', async () => {
    const show = async () => JSON.parse((await meter('budget', 'show', '--account', 'acme', '--json')).stdout);
    await meter('budget', 'set', '--account', 'acme', '--monthly', '250.5', '--hard-cap');
    expect(await meter('budget', 'set', '--account', 'acme', '--monthly', '300')).toMatchObject({
      code: 0,
      stdout: 'budget of acme: $300 a month, hard cap on\n',
    });
    expect(await show()).toMatchObject({ budget: 300, hard_cap: true });
    expect((await meter('budget', 'set', '--account', 'acme', '--monthly', '300', '--no-hard-cap')).stdout).toBe(
      'budget of acme: $300 a month\n',
    );
    expect(await show()).toMatchObject({ budget: 300, hard_cap: false });
    expect((await meter('budget', 'set', '--account', 'acme', '--monthly', '310')).stdout).toBe(
      'budget of acme: $310 a month\n',
    );
    expect(await show()).toMatchObject({ budget: 310, hard_cap: false });
    // Free: a cap that is not asked for is not refused, whatever the plan
    expect((await meter('budget', 'set', '--account', 'free-co', '--monthly', '11', '--no-hard-cap')).code).toBe(0);
  });

  it('a raised budget re-arms the fired levels above the new utilisation', async () => {
    await meter('budget', 'set', '--account', 'acme', '--monthly', '12');
    await new BudgetMonitor(db, silentLogger, { sweepMs: 50 }).refresh(); // 102.88%: 50, 80, 100 fire
    expect(JSON.parse((await meter('budget', 'show', '--account', 'acme', '--json')).stdout).levels_fired).toEqual([
      50, 80, 100,
    ]);
    const raised = await meter('budget', 'set', '--account', 'acme', '--monthly', '20');
    expect(raised.stdout).toBe(
      'budget of acme: $20 a month\nalerts at 80%, 100% will fire again when the new budget reaches them\n',
    );
    expect(JSON.parse((await meter('budget', 'show', '--account', 'acme', '--json')).stdout)).toMatchObject({
      budget: 20,
      utilization_pct: 61.72,
      levels_fired: [50],
    });
  });

  it('clear removes the budget; unknown accounts are named', async () => {
    expect((await meter('budget', 'clear', '--account', 'acme')).stdout).toBe('budget of acme cleared\n');
    expect((await meter('budget', 'clear', '--account', 'acme')).stdout).toBe('acme had no budget\n');
    expect(JSON.parse((await meter('budget', 'show', '--account', 'acme', '--json')).stdout)).toMatchObject({
      budget: null,
      hard_cap: false,
      spend: 12.34567891,
      utilization_pct: null,
    });
    for (const cmd of [['show'], ['clear'], ['set', '--monthly', '5']]) {
      const r = await meter('budget', ...cmd, '--account', 'nope');
      expect(r).toMatchObject({ code: 1, stderr: 'meter: unknown account "nope" (see `meter accounts list`)\n' });
    }
  });

  it('set, show and clear are shorthands for the account/month/UTC budget, whoever made it', async () => {
    const json = async (...args: string[]) =>
      JSON.parse((await meter(...args, '--json')).stdout) as Record<string, unknown>;
    const made = await json('budgets', 'create', '--account', 'acme', '--amount', '20', '--levels', '25,90');
    const quarter = await json('budgets', 'create', '--account', 'acme', '--amount', '20', '--window', 'quarter');
    // The amount changes; its id, levels and action stay.
    expect(await json('budget', 'set', '--account', 'acme', '--monthly', '30')).toMatchObject({ budget: 30 });
    expect(await json('budgets', 'show', String(made.id))).toMatchObject({
      amount: 30,
      levels: [25, 90],
      action: 'alert',
    });
    // Another budget cannot become a second one.
    const second = await meter('budgets', 'update', String(quarter.id), '--window', 'month');
    expect(second).toMatchObject({ code: 1 });
    expect(second.stderr).toContain(`meter: account "acme" already has its monthly budget ${String(made.id)} (`);
    // clear deletes that budget only.
    expect((await meter('budget', 'clear', '--account', 'acme')).stdout).toBe('budget of acme cleared\n');
    const left = (await json('budgets', 'list', '--account', 'acme')) as { budgets: { id: string }[] };
    expect(left.budgets.map((b) => b.id)).toEqual([quarter.id]);
  });
});
