import { expect, it } from 'vitest';
import { createAccount } from '../../src/auth/accounts.js';
import { createKey } from '../../src/auth/keys.js';
import { setBudget } from '../../src/budget/admin.js';
import { createBudget } from '../../src/budget/budgets-admin.js';
import { formatUnits, toUnits } from '../../src/money.js';
import { openEmbedded } from '../../src/store/embedded.js';
import { migrate, openStore } from '../../src/store/index.js';
import type { Db } from '../../src/store/types.js';
import { ACTUAL, burst, WORST, WORST_TOKENS } from '../helpers/burst.js';
import { eventually, startFullDaemon } from '../helpers/fleet.js';
import { describeEachBackend, tempDir } from '../helpers/stores.js';
import { startFakeUpstream } from '../helpers/upstreams.js';

const FIT = 20;

// The fleet's limits on one sidecar, on every store (TimescaleDB mode on its test engine): 64
// calls at once admit exactly what the hard cap (both rules), the quota and both per-minute
// limits hold. The hard cap admits while spend plus the worst cases in flight is below its
// amount: 19½ worst cases admit 20 calls (the 20th takes it past). A strict cap admits only
// calls whose worst case fits: 20½ worst cases admit 20 too.
describeEachBackend(
  'limits of one sidecar',
  (backend) => {
    it('the hard cap, the quota, calls and tokens a minute each admit exactly the calls that fit', async () => {
      const { databaseUrl, dataDir } = await backend.config();
      const setup: Db = databaseUrl
        ? await openStore({ databaseUrl, dataDir: tempDir(), dbPoolMax: 1 })
        : await openEmbedded(dataDir);
      await migrate(setup);
      await setup.query(
        `UPDATE plans SET monthly_call_quota = ${FIT}, rate_limit_per_minute = 1000 WHERE name = 'free'`,
      );
      const keys: Record<string, string> = {};
      for (const [account, plan] of [
        ['capped', 'pro'],
        ['strict', 'pro'],
        ['quota', 'free'],
        ['calls', 'pro'],
        ['tokens', 'pro'],
      ] as const) {
        await createAccount(setup, account, plan);
        const { id, key } = await createKey(setup, account);
        keys[account] = key;
        if (account === 'calls' || account === 'tokens')
          await setup.query(
            `INSERT INTO limit_overrides (account_id, key_id, calls_per_minute, tokens_per_minute)
             SELECT a.id, $2, $3, $4 FROM accounts a WHERE a.name = $1`,
            [account, id, account === 'calls' ? FIT : null, account === 'tokens' ? FIT * WORST_TOKENS + 10 : null],
          );
      }
      await setBudget(setup, 'capped', formatUnits(WORST * BigInt(FIT) - WORST / 2n), true);
      await createBudget(setup, 'strict', {
        amount: formatUnits(WORST * BigInt(FIT) + WORST / 2n),
        action: 'block',
        strict: true,
      });
      await setup.close();

      const upstream = await startFakeUpstream();
      const daemon = await startFullDaemon(databaseUrl, upstream, {
        METER_DATA_DIR: dataDir,
        ...(backend.name === 'timescale' ? { METER_DB_POOL_MAX: '1' } : {}),
      });
      const expected = {
        capped: [402, 'budget_exceeded'],
        strict: [402, 'budget_exceeded'],
        quota: [429, 'quota_exceeded'],
      } as Record<string, unknown>;
      for (const account of ['capped', 'strict', 'quota', 'calls', 'tokens']) {
        const answers = await burst(upstream, [daemon.url], keys[account]!);
        expect(
          answers.filter((a) => a.status === 200),
          account,
        ).toHaveLength(FIT);
        for (const a of answers.filter((x) => x.status !== 200))
          expect([a.status, a.code]).toEqual(expected[account] ?? [429, 'rate_limited']);
      }
      // The capped account's spend, read from the store: 20 calls' real cost.
      const spend = async () =>
        toUnits(
          (
            await daemon.store.query<{ spend: string }>(
              `SELECT COALESCE(sum(d.spend), 0)::text AS spend FROM usage_daily d
                 JOIN accounts a ON a.id = d.account_id WHERE a.name = 'capped'`,
            )
          )[0]!.spend,
        );
      await eventually(async () => (await spend()) === ACTUAL * BigInt(FIT), 15_000, 'the capped calls written');
    }, 180_000);
  },
  { timescale: true },
);
