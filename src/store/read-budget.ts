/**
 * The share of the store's connections that reads on behalf of API clients (analytics, exports)
 * may hold at once. The rest stay free for the work no client may starve: the proxy's keys and
 * limits, the event writer, /readyz. Within the share, one account holds at most `perAccount`
 * statements, so a tenant sending many slow or heavy reads queues behind itself, not others.
 * Waiting readers are served first come, first served among the accounts that have room.
 */
import type { Queryable } from './types.js';

export interface ReadBudget {
  /** The store as `accountId`'s reads see it: each statement waits for a slot of the share. */
  for(accountId: string): Queryable;
  /** Statements running and waiting now (for tests and /metrics). */
  readonly running: number;
  readonly waiting: number;
}

/** The share of a pool of `poolMax` connections: half of it (at least one), and a quarter of
 *  it (at least one) per account, so two accounts can always read side by side. */
export function readShare(poolMax: number): { slots: number; perAccount: number } {
  const slots = Math.max(1, Math.floor(poolMax / 2));
  return { slots, perAccount: Math.max(1, Math.ceil(slots / 2)) };
}

export function createReadBudget(store: Queryable, share: { slots: number; perAccount: number }): ReadBudget {
  let running = 0;
  const byAccount = new Map<string, number>();
  const queue: { accountId: string; go: () => void }[] = [];

  const hasRoom = (accountId: string) => running < share.slots && (byAccount.get(accountId) ?? 0) < share.perAccount;
  const take = (accountId: string) => {
    running++;
    byAccount.set(accountId, (byAccount.get(accountId) ?? 0) + 1);
  };

  function acquire(accountId: string): Promise<void> {
    if (queue.length === 0 && hasRoom(accountId)) {
      take(accountId);
      return Promise.resolve();
    }
    return new Promise((go) => queue.push({ accountId, go }));
  }

  function release(accountId: string): void {
    running--;
    const left = byAccount.get(accountId)! - 1;
    if (left) byAccount.set(accountId, left);
    else byAccount.delete(accountId);
    for (let i = 0; i < queue.length && running < share.slots;) {
      const next = queue[i]!;
      if (!hasRoom(next.accountId)) {
        i++;
        continue;
      }
      queue.splice(i, 1);
      take(next.accountId);
      next.go();
    }
  }

  return {
    for: (accountId) => ({
      async query<T>(...args: Parameters<Queryable['query']>) {
        await acquire(accountId);
        try {
          return await store.query<T>(...args);
        } finally {
          release(accountId);
        }
      },
    }),
    get running() {
      return running;
    },
    get waiting() {
      return queue.length;
    },
  };
}
