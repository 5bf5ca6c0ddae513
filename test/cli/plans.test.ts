import { describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.js';
import { tempDir } from '../helpers/stores.js';

describe('meter plans', () => {
  it(
    'lists the default plans and changes a limit; bad values are refused naming what is allowed',
    { timeout: 180_000 },
    async () => {
      const env = { METER_DATA_DIR: tempDir(), DATABASE_URL: '' };
      const list = JSON.parse((await runCli(['plans', 'list', '--json'], env)).stdout) as { name: string }[];
      expect(list.find((p) => p.name === 'free')).toEqual({
        name: 'free',
        monthly_calls: 10000,
        max_keys: 2,
        retention_days: 7,
        rollup_months: 13,
        rate_limit_per_min: 60,
        tokens_per_min: null,
        account_calls_per_min: null,
        account_tokens_per_min: null,
        analytics: ['summary', 'daily', 'reconciliation'],
        hard_cap: false,
      });
      expect(
        (await runCli(['plans', 'set', 'pro', '--monthly-calls', '1000000', '--rate-limit', '6000'], env)).code,
      ).toBe(0);
      const after = JSON.parse((await runCli(['plans', 'list', '--json'], env)).stdout) as { name: string }[];
      expect(after.find((p) => p.name === 'pro')).toMatchObject({ monthly_calls: 1000000, rate_limit_per_min: 6000 });
      // No limit is null, never a string; `plans set --json` prints the plan as `list` does.
      const unlimited = await runCli(['plans', 'set', 'pro', '--monthly-calls', 'unlimited', '--json'], env);
      expect(JSON.parse(unlimited.stdout)).toMatchObject({
        name: 'pro',
        monthly_calls: null,
        analytics: ['summary', 'daily', 'by-tag', 'events', 'reconciliation', 'export'],
      });

      const tokens = await runCli(['plans', 'set', 'pro', '--tokens-per-minute', '200000', '--json'], env);
      expect(JSON.parse(tokens.stdout)).toMatchObject({ tokens_per_min: 200000, account_calls_per_min: null });

      // An account's and a key's own per-minute limits, in place of the plan's.
      expect((await runCli(['accounts', 'create', 'acme', '--plan', 'pro'], env)).code).toBe(0);
      const key = JSON.parse((await runCli(['keys', 'create', '--account', 'acme', '--json'], env)).stdout) as {
        id: string;
      };
      await runCli(['limits', 'set', '--account', 'acme', '--calls-per-minute', '500'], env);
      const set = await runCli(
        ['limits', 'set', '--account', 'acme', '--key', key.id, '--tokens-per-minute', '9000', '--json'],
        env,
      );
      expect(JSON.parse(set.stdout)).toMatchObject({
        account: 'acme',
        plan: 'pro',
        plan_limits: { key_calls_per_minute: 6000, key_tokens_per_minute: 200000 },
        overrides: [
          { key_id: null, calls_per_minute: 500, tokens_per_minute: null },
          { key_id: key.id, calls_per_minute: null, tokens_per_minute: 9000 },
        ],
      });
      // `plan` puts a figure back; an override left with nothing is gone.
      await runCli(['limits', 'set', '--account', 'acme', '--key', key.id, '--tokens-per-minute', 'plan'], env);
      const shown = await runCli(['limits', 'show', '--account', 'acme'], env);
      expect(shown.stdout).toContain('per key 6000 calls and 200000 tokens a minute');
      expect(shown.stdout).not.toContain(`key ${key.id}`);
      const noKey = await runCli(
        ['limits', 'set', '--account', 'acme', '--key', 'abcdefabcdef', '--calls-per-minute', '5'],
        env,
      );
      expect(noKey.stderr.trim()).toBe('meter: account acme has no key abcdefabcdef (meter keys list --account acme)');
      const nothing = await runCli(['limits', 'set', '--account', 'acme'], env);
      expect(nothing.code).toBe(2);

      const bad = await runCli(['plans', 'set', 'pro', '--rate-limit', 'fast'], env);
      expect(bad.code).toBe(2);
      expect(bad.stderr).toContain('--rate-limit "fast": expected a whole number from 1 to 2000000000');
      const unknown = await runCli(['plans', 'set', 'gold', '--max-keys', '3'], env);
      expect(unknown.stderr.trim()).toBe('meter: unknown plan "gold": expected one of free, pro');
      expect(unknown.code).toBe(1);
    },
  );
});
