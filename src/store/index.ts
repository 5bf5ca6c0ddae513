import type { Config } from '../config.js';
import { openEmbedded } from './embedded.js';
import { StoreLockedError } from './lockfile.js';
import { migrate } from './migrate.js';
import { openPostgres } from './postgres.js';
import { openRemote } from './remote.js';
import type { Db } from './types.js';

export type { Db, Queryable, StoreKind } from './types.js';
export { migrate } from './migrate.js';

export type Store = Db & {
  /** Embedded only: tell CLI commands where this daemon's admin API is. */
  setAdmin?(url: string, token: string): void;
};

/** PostgreSQL when DATABASE_URL is set, else the embedded store in METER_DATA_DIR.
 *  Pending migrations are applied before the store is handed out. */
export async function openStore(config: Pick<Config, 'databaseUrl' | 'dataDir'>): Promise<Store> {
  const db: Store = config.databaseUrl ? openPostgres(config.databaseUrl) : await openEmbedded(config.dataDir);
  try {
    await migrate(db);
  } catch (err) {
    await db.close();
    throw err;
  }
  return db;
}

/** For CLI commands: like openStore, but when a live daemon holds the embedded store, its
 *  admin API is used instead (that daemon has applied the migrations). */
export async function openStoreForCli(config: Pick<Config, 'databaseUrl' | 'dataDir'>): Promise<Store> {
  try {
    return await openStore(config);
  } catch (err) {
    if (err instanceof StoreLockedError && err.owner.adminUrl && err.owner.adminToken) {
      return openRemote(err.owner.adminUrl, err.owner.adminToken);
    }
    throw err;
  }
}
