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

      const bad = await runCli(['plans', 'set', 'pro', '--rate-limit', 'fast'], env);
      expect(bad.code).toBe(2);
      expect(bad.stderr).toContain('--rate-limit "fast": expected a whole number from 1 to 2000000000');
      const unknown = await runCli(['plans', 'set', 'gold', '--max-keys', '3'], env);
      expect(unknown.stderr.trim()).toBe('meter: unknown plan "gold": expected one of free, pro');
      expect(unknown.code).toBe(1);
    },
  );
});
