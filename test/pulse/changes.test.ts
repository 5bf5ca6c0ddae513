import { describe, expect, it } from 'vitest';
import { ChangeWatcher, type Pulse } from '../../src/pulse/changes.js';
import { insertBatch } from '../../src/store/event-batch.js';
import { migrate } from '../../src/store/migrate.js';
import { openPostgres } from '../../src/store/postgres.js';
import { makeEvent } from '../analytics/helpers/seed.js';
import { createAccount, silentLogger } from '../budget/helpers/seed.js';
import { atFileEnd } from '../helpers/cleanup.js';
import { createTestDatabase, postgresUrl } from '../helpers/stores.js';

const heard = (p: Pulse) => ({ changed: p.changed, dirty: [...p.dirty].sort() });

describe.skipIf(!postgresUrl)('the pulse on PostgreSQL', () => {
  it('a listener that keeps failing hears what it missed once it recovers, and holds no one else back', async () => {
    const db = openPostgres(await createTestDatabase());
    atFileEnd(() => db.close());
    await migrate(db);
    const [a, b] = [await createAccount(db, 'a'), await createAccount(db, 'b')];
    const watcher = new ChangeWatcher(db, silentLogger, 60_000);
    watcher.served.touch(a);
    watcher.served.touch(b);
    let reloads = 0;
    watcher.watch(async () => void reloads++);
    const healthy: ReturnType<typeof heard>[] = [];
    const flaky: ReturnType<typeof heard>[] = [];
    let failing = false;
    watcher.onPulse(async (p) => void healthy.push(heard(p)));
    watcher.onPulse(async (p) => {
      if (failing) throw new Error('budget re-read failed');
      flaky.push(heard(p));
    });
    const bump = () => db.query('UPDATE meter_changes SET version = version + 1 WHERE id = 1');
    const event = (account: string) =>
      insertBatch(db, [makeEvent({ accountId: account, time: new Date().toISOString() })]);

    await watcher.check(); // the first pulse: everything is read
    expect(reloads).toBe(1);

    failing = true;
    await bump();
    await event(a);
    await expect(watcher.check()).rejects.toThrow('budget re-read failed');
    await expect(watcher.check()).rejects.toThrow('budget re-read failed');
    // The change was reloaded once: the failing listener does not make every pulse reload.
    expect(reloads).toBe(2);
    // The healthy listener moved on: the change once (a's event may come again within the
    // pulse's 5 s overlap, the change does not).
    expect(healthy.slice(1).map((p) => p.changed)).toEqual([true, false]);
    expect(healthy[1]!.dirty).toEqual([a]);

    failing = false;
    await event(b);
    await watcher.check();
    expect(reloads).toBe(2);
    expect(healthy.at(-1)!.changed).toBe(false);
    expect(healthy.at(-1)!.dirty).toContain(b);
    // The listener that failed hears the change and every account it missed, at once.
    expect(flaky.slice(1)).toEqual([{ changed: true, dirty: [a, b].sort() }]);

    await watcher.check();
    expect(flaky.at(-1)!.changed).toBe(false);
  });
});
