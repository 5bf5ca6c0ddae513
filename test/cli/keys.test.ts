import { beforeAll, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.js';
import { storeConfigForFile } from '../helpers/file-stores.js';
import { describeEachBackend } from '../helpers/stores.js';

const KEY = /^mk_[0-9a-f]{12}_[A-Za-z0-9_-]{32,}$/;

describeEachBackend('meter keys', (backend) => {
  let env: NodeJS.ProcessEnv;
  let created: { id: string; key: string; account: string; name: string; created_at: string };

  beforeAll(async () => {
    const c = await storeConfigForFile(backend.name);
    env = { DATABASE_URL: c.databaseUrl ?? '', METER_DATA_DIR: c.dataDir };
    expect((await runCli(['accounts', 'create', 'acme'], env)).code).toBe(0);
  }, 120_000);

  it(
    'creates a key and prints it once (--json: id, key, account, name, created_at)',
    { timeout: 120_000 },
    async () => {
      const r = await runCli(['keys', 'create', '--account', 'acme', '--name', 'ci', '--json'], env);
      expect(r.code).toBe(0);
      created = JSON.parse(r.stdout);
      expect(Object.keys(created)).toEqual(['id', 'key', 'account', 'name', 'created_at']);
      expect(created).toMatchObject({ account: 'acme', name: 'ci', key: expect.stringMatching(KEY) });
      expect(created.key.slice(3, 15)).toBe(created.id);
      const plain = await runCli(['keys', 'create', '--account', 'acme'], env);
      expect(plain.stdout).toMatch(new RegExp(`^${KEY.source.slice(1, -1)}\n$`));
      expect(plain.stderr).toContain('shown only once');
    },
  );

  it('refuses a key over the plan limit, naming it; and an unknown account', { timeout: 120_000 }, async () => {
    const third = await runCli(['keys', 'create', '--account', 'acme'], env);
    expect(third.code).not.toBe(0);
    expect(third.stderr).toContain('already has 2 active keys, the limit of the free plan');
    const ghost = await runCli(['keys', 'create', '--account', 'ghost'], env);
    expect(ghost.stderr.trim()).toBe('meter: unknown account "ghost" (see `meter accounts list`)');
  });

  it(
    'rotates with a grace period (bad durations named), revokes, and lists without secrets',
    { timeout: 120_000 },
    async () => {
      const bad = await runCli(['keys', 'rotate', created.id, '--grace', '2w'], env);
      expect(bad.code).not.toBe(0);
      expect(bad.stderr).toContain(
        'invalid --grace "2w": expected a number followed by s, m, h or d (30s, 15m, 1h, 2d), or 0',
      );
      const rotated = await runCli(['keys', 'rotate', created.id, '--grace', '15m', '--json'], env);
      expect(rotated.code).toBe(0);
      const r = JSON.parse(rotated.stdout);
      expect(r).toMatchObject({ key: expect.stringMatching(KEY), account: 'acme', name: 'ci', replaces: created.id });
      const graceMs = Date.parse(r.old_expires_at) - Date.parse(r.created_at);
      expect(graceMs).toBeGreaterThan(14 * 60_000);
      expect(graceMs).toBeLessThanOrEqual(15 * 60_000 + 1_000);

      expect((await runCli(['keys', 'revoke', r.id], env)).stdout).toBe(`revoked key ${r.id}\n`);
      const unknown = await runCli(['keys', 'revoke', '000000000000'], env);
      expect(unknown.stderr.trim()).toBe('meter: unknown key "000000000000" (see `meter keys list`)');

      const list = await runCli(['keys', 'list', '--account', 'acme', '--json'], env);
      const keys = JSON.parse(list.stdout) as { id: string; status: string }[];
      expect(keys).toHaveLength(3);
      expect(keys.find((k) => k.id === created.id)?.status).toBe('rotating');
      expect(keys.find((k) => k.id === r.id)?.status).toBe('revoked');
      for (const secret of [created.key, r.key]) expect(list.stdout).not.toContain(secret.slice(16));
      const text = await runCli(['keys', 'list'], env);
      expect(text.stdout).toMatch(/^ID\s+ACCOUNT\s+NAME\s+STATUS\s+CREATED_AT\s+EXPIRES_AT\n/);
      expect(text.stdout).not.toContain(created.key.slice(16));
    },
  );
});
