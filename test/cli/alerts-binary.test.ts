import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { migrate } from '../../src/store/migrate.js';
import { openPostgres } from '../../src/store/postgres.js';
import { packageRoot } from '../../src/paths.js';
import { httpReceiver } from '../alerts/helpers/receivers.js';
import { addWebhook, createAccount } from '../budget/helpers/seed.js';
import { createTestDatabase, postgresUrl } from '../helpers/stores.js';

/** The real `meter` command (from source, as `npm run meter` runs it): exit codes and stderr. */
function meter(
  args: string[],
  env: Record<string, string>,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(join(packageRoot, 'node_modules/.bin/tsx'), ['cli/main.ts', ...args], {
    cwd: packageRoot,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
}

describe.skipIf(!postgresUrl)('meter alerts test and budget set, as a user runs them', () => {
  it('exit non-zero with one line naming what failed', async () => {
    const databaseUrl = await createTestDatabase();
    const db = openPostgres(databaseUrl);
    try {
      await migrate(db);
      const acct = await createAccount(db, 'acme', 'free');
      const rx = await httpReceiver(() => 503);
      const channel = await addWebhook(db, acct, `${rx.url}/hook`);
      const env = { DATABASE_URL: databaseUrl, METER_DEBUG: '' };

      const test = await meter(['alerts', 'test', '--account', 'acme'], env);
      expect(test.code).toBe(1);
      expect(test.stderr).toBe(
        `meter: alerts test: 1 of 1 channels failed: webhook ${channel} (HTTP 503: receiver says no)\n`,
      );
      expect(rx.received).toHaveLength(1);

      const cap = await meter(['budget', 'set', '--account', 'acme', '--monthly', '50', '--hard-cap'], env);
      expect(cap.code).toBe(1);
      expect(cap.stderr).toMatch(/^meter: --hard-cap is not available on the free plan of account "acme"[^\n]*\n$/);
    } finally {
      await db.close();
    }
  }, 60_000);
});
