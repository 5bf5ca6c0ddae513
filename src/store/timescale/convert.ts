import type { Config } from '../../config.js';
import { migrate, schemaMode } from '../migrate.js';
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
    if ((await schemaMode(db)) === 'timescale') {
      await migrate(ts);
      return { db: ts, conversion: 'already' };
    }
    await migrate(db);
    await ensureTimescale(db);
    await migrate(ts, undefined, { convert: true });
    const [first] = await ts.query<{ t: Date | null }>('SELECT min(time) AS t FROM usage_events');
    if (first?.t) await refreshAggregates(ts, { from: new Date(first.t) });
    return { db: ts, conversion: 'converted' };
  } catch (err) {
    await db.close();
    throw err;
  }
}
