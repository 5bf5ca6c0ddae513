import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import type { Logger } from '../../src/log.js';
import { openStore, type Store, type StoreConfig } from '../../src/store/index.js';
import { atFileEnd } from './cleanup.js';

/**
 * A real TimescaleDB engine for tests (test/helpers/timescale-engine.mjs): PGlite with
 * TimescaleDB 2.23 in one child process per test file, served over the wire. Each call of
 * `timescaleDatabase()` gets a fresh database (its own PGlite instance and port). Every
 * connection to one shares a single session, so meter connects with a pool of one
 * (METER_DB_POOL_MAX=1) — the daemon's real DATABASE_URL path otherwise.
 */
let engine: Promise<ChildProcess> | undefined;
let nextId = 1;
const waiting = new Map<number, { resolve(port: number): void; reject(err: Error): void }>();

function startEngine(): Promise<ChildProcess> {
  return new Promise((resolve, reject) => {
    const child = fork(fileURLToPath(new URL('./timescale-engine.mjs', import.meta.url)), {
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    });
    child.on('message', (m: { ready?: boolean; id?: number; ok?: boolean; port?: number; error?: string }) => {
      if (m.ready) return resolve(child);
      const w = waiting.get(m.id!);
      if (!w) return;
      waiting.delete(m.id!);
      if (m.ok) w.resolve(m.port ?? 0);
      else w.reject(new Error(`TimescaleDB test engine: ${m.error}`));
    });
    child.on('error', reject);
    child.on('exit', (code, signal) => {
      const how = signal ?? `code ${code}`;
      for (const w of waiting.values()) w.reject(new EngineExited(`TimescaleDB test engine exited (${how})`));
      waiting.clear();
      reject(new EngineExited(`TimescaleDB test engine exited before it was ready (${how})`));
      engine = undefined; // the next request starts a new one
    });
    atFileEnd(() => {
      child.disconnect();
      child.kill();
    });
  });
}

class EngineExited extends Error {}

async function request(id: number, msg: Record<string, unknown>): Promise<number> {
  const child = await (engine ??= startEngine());
  const reply = new Promise<number>((resolve, reject) => waiting.set(id, { resolve, reject }));
  child.send({ ...msg, id });
  return reply;
}

/** A fresh database on the engine; `timescale: false` starts it without the extension (a
 *  PostgreSQL server where TimescaleDB is not installed). Closed at the end of the file. */
export async function timescaleDatabase(opts: { timescale?: boolean } = {}): Promise<string> {
  const open = async () => {
    const id = nextId++;
    return { id, port: await request(id, { op: 'open', timescale: opts.timescale !== false }) };
  };
  // Seen once in a full run on 2 loaded cores: the engine process ended by a signal, printing
  // nothing, while it opened a database. A new engine opens it again; databases the dead one
  // held are gone with it, and their tests fail as they would have.
  const { id, port } = await open().catch((err: unknown) => {
    if (err instanceof EngineExited) return open();
    throw err;
  });
  atFileEnd(() => request(nextId++, { op: 'close', closes: id }).catch(() => {}));
  return `postgres://postgres@127.0.0.1:${port}/postgres`;
}

/**
 * openStore on the engine. The engine's socket server resets a connection that arrives while
 * the previous client's close is still being processed (a pool closed, then a new one at once):
 * opening is retried until the engine answers.
 */
export async function openOnEngine(config: StoreConfig, logger?: Logger): Promise<Store> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    try {
      return await openStore({ dbPoolMax: 1, ...config }, logger);
    } catch (err) {
      const reset = /ECONNRESET|Connection terminated unexpectedly/.test((err as Error).message);
      if (!reset || Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}

/** Closes a store on the engine and waits until the engine takes a new connection again
 *  (it serves one client at a time well: another process connects next). */
export async function closeOnEngine(db: Store, url: string): Promise<void> {
  await db.close();
  const deadline = Date.now() + 10_000;
  for (;;) {
    const client = new pg.Client({ connectionString: url });
    try {
      await client.connect();
      await client.query('SELECT 1');
      await client.end();
      return;
    } catch (err) {
      await client.end().catch(() => {});
      if (Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}
