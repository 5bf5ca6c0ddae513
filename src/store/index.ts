import { maskUrl, type Config } from '../config.js';
import type { Logger } from '../log.js';
import { openEmbedded } from './embedded.js';
import type { AdminAddress } from './lockfile.js';
import { migrate, migrateLocked, MIGRATE_LOCK } from './migrate.js';
import { chooseMode, describeServer, inTimescaleMode } from './timescale/mode.js';
import type { Db } from './types.js';

export type { Db, Queryable, StoreKind } from './types.js';
export { migrate } from './migrate.js';

export type Store = Db & {
  /** Embedded only: tell CLI commands where this daemon's admin API is. */
  setAdmin?(address: AdminAddress): void;
};

export type StoreConfig = Pick<Config, 'databaseUrl' | 'dataDir'> &
  Partial<Pick<Config, 'store' | 'dbPoolMax' | 'dbIdleMs'>> & {
    /** The embedded store's worker yields the CPU to the proxy (EmbeddedOptions.yieldCpu). */
    embeddedYieldsCpu?: boolean;
  };

/** PostgreSQL (plain or TimescaleDB mode, chosen from the database) when DATABASE_URL is set,
 *  else the embedded store in METER_DATA_DIR. Pending migrations are applied before the store
 *  is handed out. */
export async function openStore(config: StoreConfig, logger?: Logger): Promise<Store> {
  // pg is loaded only for PostgreSQL (the embedded store starts without it).
  let db: Store = config.databaseUrl
    ? (await import('./postgres.js')).openPostgres(config.databaseUrl, {
        max: config.dbPoolMax,
        idleMs: config.dbIdleMs,
      })
    : await openEmbedded(config.dataDir, { yieldCpu: config.embeddedYieldsCpu });
  try {
    if (db.kind === 'postgres') {
      // One lock for choosing and migrating: sidecars started together on a new database wait
      // for the first, then find its schema and take its mode.
      const mode = await db.withAdvisoryLock(MIGRATE_LOCK, async (conn) => {
        const chosen = await chooseMode(conn, { store: config.store, logger });
        await migrateLocked(conn, chosen);
        return chosen;
      });
      if (mode === 'timescale') db = inTimescaleMode(db);
    } else await migrate(db);
  } catch (err) {
    await db.close();
    throw config.databaseUrl ? withDatabaseName(err as Error, config.databaseUrl) : err;
  }
  return db;
}

/** The database server cannot be reached: nothing listens, the name does not resolve (yet),
 *  the network drops the connection. */
export const UNREACHABLE = [
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ETIMEDOUT',
  'ECONNRESET',
  'EHOSTUNREACH',
  'ENETUNREACH',
];

/** Errors that mean "this DATABASE_URL does not lead to a database meter can use": unreachable,
 *  wrong credentials (28P01, 28000), no such database (3D000). */
const CONNECT_ERRORS = new Set([...UNREACHABLE, '28P01', '28000', '3D000']);

/** A connection failure names DATABASE_URL (password masked), so the user knows what to fix. */
export function withDatabaseName(err: Error, url: string): Error {
  const code = (err as { code?: string }).code;
  const connect = (code !== undefined && CONNECT_ERRORS.has(code)) || /timeout|terminated|connect/i.test(err.message);
  if (!connect) return err;
  const named = new Error(`cannot use the database at DATABASE_URL=${maskUrl(url)}: ${err.message}`, { cause: err });
  Object.assign(named, { code });
  return named;
}

/** What `meter start` logs about its store: the mode and the server's versions. */
export async function describeStore(db: Store): Promise<Record<string, string>> {
  if (db.kind === 'embedded') return { store: 'embedded' };
  const { postgresql, timescaledb } = await describeServer(db);
  return { store: db.kind, postgresql, ...(timescaledb ? { timescaledb } : {}) };
}
