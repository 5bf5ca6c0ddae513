// A process that races for the embedded store's lock when told to (test/store/lockfile.test.ts):
// on each `{ dir }` it takes the lock, holds it a moment, lets it go, and says when it held it.
import { acquireLock } from '../../src/store/lockfile.js';

const HOLD_MS = 20;

process.on('message', ({ dir }: { dir: string }) => {
  try {
    const lock = acquireLock(dir);
    const from = performance.timeOrigin + performance.now();
    setTimeout(() => {
      const to = performance.timeOrigin + performance.now();
      lock.release();
      process.send!({ held: [from, to] });
    }, HOLD_MS);
  } catch (err) {
    const e = err as Error;
    process.send!(e.name === 'StoreLockedError' ? { locked: true } : { error: e.message });
  }
});
process.send!({ ready: true });
