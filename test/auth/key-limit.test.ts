import { describe, expect, it } from 'vitest';
import { AdminError, createAccount } from '../../src/auth/accounts.js';
import { createKey, revokeKey } from '../../src/auth/keys.js';
import { migrate } from '../../src/store/migrate.js';
import { openPostgres } from '../../src/store/postgres.js';
import { atFileEnd } from '../helpers/cleanup.js';
import { createTestDatabase, postgresUrl } from '../helpers/stores.js';

describe.skipIf(!postgresUrl)('the plan key limit under concurrent `meter keys create`', () => {
  it('lets no more keys through than the limit, whatever creations race', async () => {
    const url = await createTestDatabase();
    const admin = openPostgres(url);
    atFileEnd(() => admin.close());
    await migrate(admin);
    await admin.query(`UPDATE plans SET max_active_keys = 3 WHERE name = 'free'`);
    await createAccount(admin, 'racy', 'free');
    // Each creation on its own pool, as separate CLI processes would be.
    const clis = Array.from({ length: 8 }, () => openPostgres(url, { max: 1 }));
    atFileEnd(() => Promise.all(clis.map((c) => c.close())));
    await Promise.all(clis.map((c) => c.query('SELECT 1'))); // connected: the race is on the statements

    for (let round = 0; round < 4; round++) {
      const results = await Promise.allSettled(clis.map((c) => createKey(c, 'racy')));
      const created = results.filter((r) => r.status === 'fulfilled');
      const refused = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
      expect(created).toHaveLength(3);
      for (const r of refused) {
        expect(r.reason).toBeInstanceOf(AdminError);
        expect((r.reason as Error).message).toContain('already has 3 active keys, the limit of the free plan');
      }
      const [row] = await admin.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM api_keys WHERE revoked_at IS NULL`,
      );
      expect(row!.n).toBe(3);
      // Free the slots for the next round.
      for (const r of created) await revokeKey(admin, (r as PromiseFulfilledResult<{ id: string }>).value.id);
    }
  });
});
