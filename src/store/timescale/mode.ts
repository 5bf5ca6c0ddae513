import { MeterFailure } from '../../errors.js';
import type { Logger } from '../../log.js';
import { schemaMode } from '../migrate.js';
import type { Db, Queryable, StoreKind } from '../types.js';

/** Continuous aggregates over a LATERAL jsonb_each_text (usage_tag_daily) need 2.23. */
export const MIN_TIMESCALEDB = [2, 23] as const;
const MIN_TEXT = MIN_TIMESCALEDB.join('.');

export type StoreChoice = 'postgres' | 'timescale';

const PRELOAD_HINT =
  "TimescaleDB must be installed on the server and loaded at its start: shared_preload_libraries = 'timescaledb' in postgresql.conf, then restart PostgreSQL";

/** Thrown when METER_STORE or the conversion asks for a mode the server cannot give. */
export class StoreModeError extends MeterFailure {
  override name = 'StoreModeError';
}

const atLeastMin = (version: string | null | undefined): boolean => {
  const [major = 0, minor = 0] = (version ?? '').split(/[.-]/).map(Number);
  return major > MIN_TIMESCALEDB[0] || (major === MIN_TIMESCALEDB[0] && minor >= MIN_TIMESCALEDB[1]);
};

/** The installed and the available TimescaleDB versions (null when absent). */
export async function timescaleVersions(
  db: Queryable,
): Promise<{ installed: string | null; available: string | null }> {
  const [row] = await db.query<{ installed: string | null; available: string | null }>(
    `SELECT (SELECT extversion FROM pg_extension WHERE extname = 'timescaledb') AS installed,
            (SELECT default_version FROM pg_available_extensions WHERE name = 'timescaledb') AS available`,
  );
  return { installed: row?.installed ?? null, available: row?.available ?? null };
}

/** Creates the extension (trusted: CREATE on the database is enough, where the server preloads
 *  it) and checks its version; the error carries the server's own message and the hint. */
export async function ensureTimescale(db: Queryable): Promise<string> {
  try {
    await db.query('CREATE EXTENSION IF NOT EXISTS timescaledb');
  } catch (err) {
    // Another session created it at the same moment (IF NOT EXISTS does not cover that race;
    // meter's own opens are serialised by the migration lock): it is there, which is all we need.
    const raced = (err as { code?: string }).code === '23505' && (await timescaleVersions(db)).installed;
    if (!raced) {
      throw new StoreModeError(
        `TimescaleDB cannot be used on this database: ${(err as Error).message}. ${PRELOAD_HINT}`,
        { cause: err },
      );
    }
  }
  const { installed } = await timescaleVersions(db);
  if (!atLeastMin(installed)) {
    throw new StoreModeError(
      `TimescaleDB ${installed} is too old: meter's TimescaleDB mode needs ${MIN_TEXT} or later`,
    );
  }
  return installed!;
}

/**
 * The mode of a PostgreSQL database. An existing database keeps the mode its schema is in
 * (usage_daily: a table, or a continuous aggregate); never the extension alone. A new one is
 * TimescaleDB when METER_STORE says so (or the server cannot, an error), or, unless
 * METER_STORE=postgres, when TimescaleDB ≥ 2.23 is installed or can be created.
 * Call it on a connection holding the migration lock (openStore does): sidecars started
 * together on a new database then all see the first one's choice and schema.
 */
export async function chooseMode(
  db: Queryable,
  opts: { store?: StoreChoice; logger?: Logger } = {},
): Promise<StoreKind> {
  const mode = await schemaMode(db);
  if (mode === 'timescale') {
    if (opts.store === 'postgres') {
      throw new StoreModeError(
        'METER_STORE=postgres, but this database is in TimescaleDB mode (usage_daily is a continuous aggregate): unset METER_STORE or set it to timescale',
      );
    }
    return 'timescale';
  }
  if (mode === 'plain') {
    if (opts.store === 'timescale') {
      throw new StoreModeError(
        'METER_STORE=timescale, but this database is in plain PostgreSQL mode: `meter migrate --to-timescale` converts it in place',
      );
    }
    const { installed, available } = await timescaleVersions(db);
    if (opts.store !== 'postgres' && atLeastMin(installed ?? available)) {
      opts.logger?.info(
        { timescaledb: installed ?? available },
        'TimescaleDB is available on this server; the database stays in plain PostgreSQL mode until `meter migrate --to-timescale` converts it',
      );
    }
    return 'postgres';
  }
  if (opts.store === 'postgres') return 'postgres';
  if (opts.store === 'timescale') {
    await ensureTimescale(db);
    return 'timescale';
  }
  const { installed, available } = await timescaleVersions(db);
  if (atLeastMin(installed)) return 'timescale';
  if (!atLeastMin(available)) return 'postgres';
  try {
    await ensureTimescale(db);
    return 'timescale';
  } catch (err) {
    // Only a server that cannot give TimescaleDB makes a new database plain; anything else
    // (a dropped connection, a race) fails the start rather than fix the mode for good.
    if (!(err instanceof StoreModeError) || !cannotCreate((err.cause as { code?: string })?.code)) throw err;
    opts.logger?.info({ reason: err.message }, 'TimescaleDB is not usable here: plain PostgreSQL mode');
    return 'postgres';
  }
}

/** A CREATE EXTENSION that failed because the server or role cannot do it (not preloaded, not
 *  installed, no privilege): a SQLSTATE other than a race (23505 unique violation, 40xxx) or
 *  a lost connection or server (08xxx, 53xxx, 57xxx; no SQLSTATE at all: a socket error). */
const cannotCreate = (code: string | undefined) =>
  code !== undefined && /^[0-9A-Z]{5}$/.test(code) && !/^(23505|40|08|53|57)/.test(code);

/** The same connection pool, in TimescaleDB mode: the writer inserts events only and the
 *  aggregates are refreshed by the daemon. */
export const inTimescaleMode = <T extends Db>(db: T): T => ({ ...db, kind: 'timescale' });

/** Server and TimescaleDB versions, for the start-up log line. */
export async function describeServer(db: Queryable): Promise<{ postgresql: string; timescaledb: string | null }> {
  const [row] = await db.query<{ postgresql: string; timescaledb: string | null }>(
    `SELECT current_setting('server_version') AS postgresql,
            (SELECT extversion FROM pg_extension WHERE extname = 'timescaledb') AS timescaledb`,
  );
  return { postgresql: row?.postgresql ?? 'unknown', timescaledb: row?.timescaledb ?? null };
}
