import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { usableTemplate } from './embedded-template.js';
import type { AdminAddress } from './lockfile.js';
import { acquireLock } from './lockfile.js';
import type { Db, Queryable, QueryOptions } from './types.js';

/** The embedded database's own error, shaped like the pg driver's (`code` is the SQLSTATE the
 *  store's callers test), so it stays a driver error, not a MeterError. */
export class EmbeddedStoreError extends Error {
  constructor(
    message: string,
    readonly code?: string,
  ) {
    super(message);
  }
}

interface Request {
  id: number;
  op: 'query' | 'exec' | 'close';
  sql?: string;
  params?: unknown[];
  /** A statement the worker prepares once under this name (QueryOptions.name). */
  name?: string;
}
/** `unchanged`: an INSERT, UPDATE, DELETE or MERGE that touched no row (the worker knows). */
type Reply = { id: number; rows?: unknown[]; unchanged?: boolean; error?: { message: string; code?: string } };

/** A copy of the bytes in an ArrayBuffer of their own, to be moved to the worker. */
function own(bytes: Uint8Array, moved: ArrayBuffer[]): Uint8Array {
  const copy = new Uint8Array(bytes);
  moved.push(copy.buffer);
  return copy;
}

/** Statements that change no data (reads, transaction control); anything else counts as a
 *  write. A script (exec) is one only when it is transaction control alone. */
const READ_ONLY = /^\s*(SELECT|SHOW|BEGIN|COMMIT|ROLLBACK|SET\s+TRANSACTION)\b/i;
const TX_CONTROL = /^\s*(BEGIN|COMMIT|ROLLBACK)\s*;?\s*$/i;
const mayWrite = (op: Request['op'], sql: string | undefined) =>
  sql !== undefined && !(op === 'exec' ? TX_CONTROL : READ_ONLY).test(sql);

const defaultWorkerFile = new URL('./embedded-worker.js', import.meta.url);

/** Waits between restarts of a worker that keeps dying: from 250 ms, doubling, up to 10 s. */
const RESTART_MIN_MS = 250;
const RESTART_MAX_MS = 10_000;

export interface EmbeddedOptions {
  /** The worker script (tests pass one that can be told to die at a chosen moment). */
  workerFile?: URL;
  /** A new store starts from the pre-built template in this directory when it is usable
   *  (default: the one `npm run build` makes); false runs initdb and leaves every migration to
   *  migrate(). */
  template?: string | false;
  /** The worker's thread runs at nice 10 so that the daemon's proxy comes first (default). A
   *  CLI command that opens the store itself (no daemon holds it) passes false: nothing there
   *  needs the CPU more, and a lowered thread crawls on a busy machine (an export, 4×). */
  yieldCpu?: boolean;
}

/**
 * The embedded default: PGlite in a worker_thread, data in dataDir/pgdata, guarded by a lock
 * file. PGlite has one connection, so statements are serialised here and a transaction holds
 * the line until it ends. `dataDir: undefined` keeps the data in memory (tests).
 *
 * A worker that dies (a WASM abort, out of memory) fails the statements it owed with an error
 * that says so, and the next statement starts a new worker on the same data directory
 * (PostgreSQL's crash recovery replays its WAL), with backoff while it keeps dying. The writer
 * meanwhile keeps the events in its spool and retries, as it does for a database that is down.
 */
export async function openEmbedded(
  dataDir: string | undefined,
  opts: EmbeddedOptions = {},
): Promise<Db & { setAdmin(address: AdminAddress): void }> {
  const lock = dataDir ? acquireLock(dataDir) : undefined;
  const workerFile = opts.workerFile ?? defaultWorkerFile;
  // The worker loads it only into a data directory that has no database yet.
  const template = opts.template === false ? undefined : usableTemplate(opts.template);
  let nextId = 1;
  const pending = new Map<number, { resolve(rows: unknown[]): void; reject(err: Error): void; mayWrite: boolean }>();
  let closing = false;
  let worker: Worker | undefined;
  /** Counts workers started: a transaction must not go on in a worker that did not see its BEGIN. */
  let generation = 0;
  /** Why the last worker stopped, while no new one runs. */
  let died: EmbeddedStoreError | undefined;
  let deaths = 0;
  let restartAt = 0;
  /** Statements that may have changed data (Db.writes), counted as they end: whatever a
   *  re-read queued behind one finds, the count moves after it, and the next interval reads. */
  let writes = 0;

  const spawnWorker = () => {
    const w = new Worker(workerFile, {
      // PGlite's JavaScript side allocates little: a small young generation keeps the worker's heap small.
      resourceLimits: { maxYoungGenerationSizeMb: 4 },
      workerData: { dataDir: dataDir && join(dataDir, 'pgdata'), template, yieldCpu: opts.yieldCpu !== false },
    });
    w.unref();
    w.on('message', (reply: Reply) => {
      const p = pending.get(reply.id);
      if (!p) return;
      pending.delete(reply.id);
      if (p.mayWrite && !reply.unchanged) writes++;
      if (reply.error) p.reject(new EmbeddedStoreError(reply.error.message, reply.error.code));
      else {
        deaths = 0; // it answers: a later death starts the backoff afresh
        p.resolve(reply.rows ?? []);
      }
    });
    let reason: string | undefined;
    w.on('error', (err) => (reason = err.message));
    w.on('exit', (code) => {
      if (worker !== w) return;
      worker = undefined;
      if (closing) return;
      died = new EmbeddedStoreError(
        `the embedded store's worker stopped (exit code ${code}${reason ? `: ${reason}` : ''}); a new one starts with the next statement`,
        'worker_exited',
      );
      deaths++;
      restartAt = Date.now() + Math.min(RESTART_MAX_MS, RESTART_MIN_MS * 2 ** (deaths - 1));
      for (const p of pending.values()) {
        if (p.mayWrite) writes++; // it may have committed before the worker died
        p.reject(died);
      }
      pending.clear();
    });
    worker = w;
    generation++;
    died = undefined;
  };
  spawnWorker();

  const send = (op: Request['op'], sql?: string, params?: unknown[], opts?: QueryOptions) =>
    new Promise<unknown[]>((resolve, reject) => {
      if (!worker && died && !closing && Date.now() >= restartAt) spawnWorker();
      const w = worker;
      if (!w) return reject(died ?? new EmbeddedStoreError('the embedded store is closed', 'closed'));
      const id = nextId++;
      pending.set(id, { resolve, reject, mayWrite: mayWrite(op, sql) });
      w.ref(); // keep the process alive while a reply is owed
      // Bytes (a batch's JSON) go as a copy of their own, moved, not cloned: a view would post
      // its whole underlying buffer, and the worker decodes them (see embedded-worker.js).
      const moved: ArrayBuffer[] = [];
      const sent = params?.map((p) => (p instanceof Uint8Array ? own(p, moved) : p));
      w.postMessage({ id, op, sql, params: sent, name: opts?.name } satisfies Request, moved);
    }).finally(() => {
      if (pending.size === 0) worker?.unref();
    });

  // One line for the single connection: a transaction keeps it until COMMIT/ROLLBACK.
  let line: Promise<unknown> = Promise.resolve();
  const serial = <T>(fn: () => Promise<T>): Promise<T> => {
    const run = line.then(fn, fn);
    line = run.catch(() => {});
    return run;
  };
  const direct: Queryable & { exec(sql: string): Promise<void> } = {
    query: <T>(sql: string, params?: unknown[], opts?: QueryOptions) =>
      send('query', sql, params, opts) as Promise<T[]>,
    exec: async (sql: string) => {
      await send('exec', sql);
    },
  };

  try {
    await serial(() => direct.query('SELECT 1'));
  } catch (err) {
    closing = true;
    lock?.release();
    await worker?.terminate();
    throw err;
  }

  return {
    kind: 'embedded',
    query: (sql, params, opts) => serial(() => direct.query(sql, params, opts)),
    exec: (sql) => serial(() => direct.exec(sql)),
    transaction: (fn) =>
      serial(async () => {
        await direct.exec('BEGIN');
        const started = generation;
        const sameWorker = <T>(run: () => Promise<T>) =>
          generation === started
            ? run()
            : Promise.reject(
                died ?? new EmbeddedStoreError('the embedded store restarted during a transaction', 'worker_exited'),
              );
        const tx: Queryable = { query: (sql, params, opts) => sameWorker(() => direct.query(sql, params, opts)) };
        try {
          const result = await fn(tx);
          await sameWorker(() => direct.exec('COMMIT'));
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
    writes: () => writes,
    setAdmin(address) {
      lock?.update({ adminSocket: address.socket, adminUrl: address.url, adminToken: address.token });
    },
    async close() {
      if (closing) return;
      closing = true;
      if (worker) await serial(() => send('close')).catch(() => {});
      await worker?.terminate();
      lock?.release();
    },
  };
}
