import { beforeAll, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.js';
import { storeConfigForFile } from '../helpers/file-stores.js';
import { describeEachBackend } from '../helpers/stores.js';

describeEachBackend('meter accounts', (backend) => {
  let env: NodeJS.ProcessEnv;
  beforeAll(async () => {
    const c = await storeConfigForFile(backend.name);
    env = { DATABASE_URL: c.databaseUrl ?? '', METER_DATA_DIR: c.dataDir };
  });

  it(
    'creates accounts (plan free by default), refuses duplicates, unknown plans and bad names',
    { timeout: 120_000 },
    async () => {
      const plain = await runCli(['accounts', 'create', 'acme'], env);
      expect(plain).toMatchObject({ code: 0, stdout: 'created account acme (plan free)\n' });
      const json = await runCli(['accounts', 'create', 'globex', '--plan', 'pro', '--json'], env);
      expect(json.code).toBe(0);
      expect(JSON.parse(json.stdout)).toEqual({
        name: 'globex',
        plan: 'pro',
        created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT.*Z$/),
      });

      const dup = await runCli(['accounts', 'create', 'acme'], env);
      expect(dup.code).not.toBe(0);
      expect(dup.stderr.trim()).toBe('meter: account "acme" already exists');
      const gold = await runCli(['accounts', 'create', 'initech', '--plan', 'gold'], env);
      expect(gold.code).not.toBe(0);
      expect(gold.stderr.trim()).toBe('meter: unknown plan "gold": expected one of free, pro');
      const bad = await runCli(['accounts', 'create', 'bad name!'], env);
      expect(bad.code).toBe(2); // a bad value is a usage error
      expect(bad.stderr).toContain('invalid account name "bad name!"');
    },
  );

  it('lists them and changes a plan; an unknown account or plan is named', { timeout: 120_000 }, async () => {
    const set = await runCli(['accounts', 'set-plan', 'acme', 'pro'], env);
    expect(set).toMatchObject({ code: 0, stdout: 'account acme: plan free -> pro\n' });
    const list = await runCli(['accounts', 'list', '--json'], env);
    expect(JSON.parse(list.stdout)).toEqual([
      { name: 'acme', plan: 'pro', created_at: expect.any(String), active_keys: 0 },
      { name: 'globex', plan: 'pro', created_at: expect.any(String), active_keys: 0 },
    ]);
    const nobody = await runCli(['accounts', 'set-plan', 'nobody', 'pro'], env);
    expect(nobody.stderr.trim()).toBe('meter: unknown account "nobody" (see `meter accounts list`)');
    const badPlan = await runCli(['accounts', 'set-plan', 'acme', 'platinum'], env);
    expect(badPlan.code).not.toBe(0);
    expect(badPlan.stderr).toContain('unknown plan "platinum": expected one of free, pro');
  });
});
