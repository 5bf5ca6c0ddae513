import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { acquireLock } from './lockfile.js';
import type { Db, Queryable } from './types.js';

export class EmbeddedStoreError extends Error {
  constructor(message: string, readonly code?: string) {
    super(message);
  }
}

interface Request {
  id: number;
  op: 'query' | 'exec' | 'close';
  sql?: string;
  params?: unknown[];
}
type Reply = { id: number; rows?: unknown[]; error?: { message: string; code?: string } };

const workerFile = new URL('./embedded-worker.js', import.meta.url);

/**
 * The embedded default: PGlite in a worker_thread, data in dataDir/pgdata, guarded by a lock
 * file. PGlite has one connection, so statements are serialised here and a transaction holds
 * the line until it ends. `dataDir: undefined` keeps the data in memory (tests).
 */
export async function openEmbedded(dataDir: string | undefined): Promise<Db & { setAdmin(url: string, token: string): void }> {
  const lock = dataDir ? acquireLock(dataDir) : undefined;
  const worker = new Worker(workerFile, { workerData: { dataDir: dataDir && join(dataDir, 'pgdata') } });
  worker.unref();
  let nextId = 1;
  const pending = new Map<number, { resolve(rows: unknown[]): void; reject(err: Error): void }>();
  let failed: Error | undefined;
  worker.on('message', (reply: Reply) => {
    const p = pending.get(reply.id);
    if (!p) return;
    pending.delete(reply.id);
    if (reply.error) p.reject(new EmbeddedStoreError(reply.error.message, reply.error.code));
    else p.resolve(reply.rows ?? []);
  });
  worker.on('error', (err) => {
    failed = err;
    for (const p of pending.values()) p.reject(err);
    pending.clear();
  });

  const send = (op: Request['op'], sql?: string, params?: unknown[]) =>
    new Promise<unknown[]>((resolve, reject) => {
      if (failed) return reject(failed);
      const id = nextId++;
      pending.set(id, { resolve, reject });
      worker.ref(); // keep the process alive while a reply is owed
      worker.postMessage({ id, op, sql, params } satisfies Request);
    }).finally(() => {
      if (pending.size === 0) worker.unref();
    });

  // One line for the single connection: a transaction keeps it until COMMIT/ROLLBACK.
  let line: Promise<unknown> = Promise.resolve();
  const serial = <T>(fn: () => Promise<T>): Promise<T> => {
    const run = line.then(fn, fn);
    line = run.catch(() => {});
    return run;
  };
  const direct: Queryable & { exec(sql: string): Promise<void> } = {
    query: <T>(sql: string, params?: unknown[]) => send('query', sql, params) as Promise<T[]>,
    exec: async (sql: string) => {
      await send('exec', sql);
    },
  };

  try {
    await serial(() => direct.query('SELECT 1'));
  } catch (err) {
    lock?.release();
    await worker.terminate();
    throw err;
  }

  let closed = false;
  return {
    kind: 'embedded',
    query: (sql, params) => serial(() => direct.query(sql, params)),
    exec: (sql) => serial(() => direct.exec(sql)),
    transaction: (fn) =>
      serial(async () => {
        await direct.exec('BEGIN');
        try {
          const result = await fn(direct);
          await direct.exec('COMMIT');
          return result;
        } catch (err) {
          await direct.exec('ROLLBACK').catch(() => {});
          throw err;
        }
      }),
    // The lock file already makes this process the only one; the line makes it the only caller.
    withAdvisoryLock: (_key, fn) => serial(() => fn(direct)),
    tryAdvisoryLock: (_key, fn) => serial(() => fn(direct)),
    async ping() {
      try {
        await serial(() => direct.query('SELECT 1'));
        return true;
      } catch {
        return false;
      }
    },
    setAdmin(adminUrl, adminToken) {
      lock?.update({ adminUrl, adminToken });
    },
    async close() {
      if (closed) return;
      closed = true;
      await serial(() => send('close')).catch(() => {});
      await worker.terminate();
      lock?.release();
    },
  };
}
