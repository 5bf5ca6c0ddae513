import { describe, expect, it } from 'vitest';
import { openPostgres } from '../../src/store/postgres.js';
import { createReadBudget, readShare } from '../../src/store/read-budget.js';
import { atFileEnd } from '../helpers/cleanup.js';
import { createTestDatabase, postgresUrl } from '../helpers/stores.js';

describe('readShare', () => {
  it('leaves half the pool to the proxy and lets two accounts read side by side', () => {
    expect(readShare(10)).toEqual({ slots: 5, perAccount: 3 });
    expect(readShare(1)).toEqual({ slots: 1, perAccount: 1 });
    expect(readShare(3)).toEqual({ slots: 1, perAccount: 1 });
    expect(readShare(4)).toEqual({ slots: 2, perAccount: 1 });
  });
});

describe.skipIf(!postgresUrl)('the read budget on PostgreSQL', () => {
  it('one account flooding reads holds its share only: the pool keeps room, another account reads at once', async () => {
    const db = openPostgres(await createTestDatabase(), { max: 4 });
    atFileEnd(() => db.close());
    const reads = createReadBudget(db, { slots: 2, perAccount: 1 });
    const hostile = reads.for('hostile');
    let finished = 0;
    const slow = Array.from({ length: 6 }, () => hostile.query('SELECT pg_sleep(0.5)').then(() => finished++));
    await new Promise((r) => setTimeout(r, 50));
    expect(reads.running).toBe(1);
    expect(reads.waiting).toBe(5);
    // The other account does not queue behind the hostile one's five waiting reads, and the
    // pool's own work (the proxy's, outside the budget) finds a connection: both are done
    // while the hostile reads, one at a time, are still mostly waiting.
    await reads.for('victim').query('SELECT 1');
    await db.query('SELECT 1');
    expect(finished).toBeLessThanOrEqual(1);
    await Promise.all(slow);
    expect(reads.running).toBe(0);
    expect(reads.waiting).toBe(0);
  });

  it('a failed statement gives its slot back', async () => {
    const db = openPostgres(await createTestDatabase(), { max: 2 });
    atFileEnd(() => db.close());
    const reads = createReadBudget(db, { slots: 1, perAccount: 1 });
    await expect(reads.for('a').query('SELECT nonsense')).rejects.toThrow();
    expect(reads.running).toBe(0);
    await expect(reads.for('a').query<{ n: number }>('SELECT 1 AS n')).resolves.toEqual([{ n: 1 }]);
  });
});
