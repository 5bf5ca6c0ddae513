import type { Config } from '../../config.js';
import { MIGRATE_LOCK, migrateLocked, schemaMode } from '../migrate.js';
import { openPostgres } from '../postgres.js';
import type { Db } from '../types.js';
import { refreshAggregates } from './maintenance.js';
import { ensureTimescale, inTimescaleMode, StoreModeError } from './mode.js';

/**
 * `meter migrate --to-timescale`: converts a plain PostgreSQL database in place. Pending plain
 * migrations first, then sql/020 in one transaction (the rollups' content is carried over, so
 * no analytics answer changes), then one refresh over the whole history, so every day is
 * materialized before retention may drop a raw chunk. Returns the open store in its new mode. Stop the sidecars first: a sidecar
 * still running in plain mode cannot write to the aggregates (its events wait in its spool).
 */
export async function convertToTimescale(
  config: Pick<Config, 'databaseUrl'> & Partial<Pick<Config, 'dbPoolMax'>>,
): Promise<{ db: Db; conversion: 'converted' | 'already' }> {
  if (!config.databaseUrl) {
    throw new StoreModeError('--to-timescale needs DATABASE_URL: the embedded store cannot use TimescaleDB');
  }
  const db = openPostgres(config.databaseUrl, { max: config.dbPoolMax });
  const ts = inTimescaleMode(db);
  try {
    // Under the migration lock throughout: a sidecar starting meanwhile waits and finds the result.
    const conversion = await db.withAdvisoryLock(MIGRATE_LOCK, async (conn) => {
      if ((await schemaMode(conn)) === 'timescale') {
        await migrateLocked(conn, 'timescale');
        return 'already' as const;
      }
      await migrateLocked(conn, 'postgres');
      await ensureTimescale(conn);
      await migrateLocked(conn, 'timescale', undefined, { convert: true });
      return 'converted' as const;
    });
    if (conversion === 'already') return { db: ts, conversion };
    const [first] = await ts.query<{ t: Date | null }>('SELECT min(time) AS t FROM usage_events');
    if (first?.t) await refreshAggregates(ts, { from: new Date(first.t) });
    return { db: ts, conversion: 'converted' };
  } catch (err) {
    await db.close();
    throw err;
  }
}
