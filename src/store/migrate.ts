import { MeterFailure } from '../errors.js';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { sqlDir } from '../paths.js';
import type { Db, Queryable, StoreKind } from './types.js';

export type Variant = 'plain' | 'timescale';

export interface Migration {
  version: number;
  name: string;
  /** Which mode the file is for; undefined: every mode. */
  variant?: Variant;
  sql: string;
}

/** The migration that turns the base schema into TimescaleDB mode (sql/020_timescale.timescale.sql).
 *  Versions below it are the base every database starts from, `.plain.sql` ones included. */
export const TIMESCALE_VERSION = 20;

export const variantOf = (kind: StoreKind): Variant => (kind === 'timescale' ? 'timescale' : 'plain');

/** Numbered SQL files: `001_init.sql`, `002_…`. A name ending `.plain.sql` applies where
 *  rollups are tables the writer maintains (postgres, embedded), `.timescale.sql` only in
 *  TimescaleDB mode. A TimescaleDB database is built from the base schema (below
 *  TIMESCALE_VERSION, plain rollups included) and converted by TIMESCALE_VERSION. */
export function loadMigrations(dir = sqlDir, kind?: StoreKind): Migration[] {
  const seen = new Map<number, string>();
  const want = kind && variantOf(kind);
  return readdirSync(dir)
    .map((file) => /^(\d+)_([\w-]+?)(?:\.(plain|timescale))?\.sql$/.exec(file))
    .filter((m): m is RegExpExecArray => m !== null)
    .filter((m) => !m[3] || !want || m[3] === want || (m[3] === 'plain' && Number(m[1]) < TIMESCALE_VERSION))
    .map((m) => {
      const version = Number(m[1]);
      const other = seen.get(version);
      if (other) throw new Error(`migrations ${other} and ${m[0]} share version ${version}`);
      seen.set(version, m[0]);
      return { version, name: m[2]!, variant: m[3] as Variant | undefined, sql: readFileSync(join(dir, m[0]), 'utf8') };
    })
    .sort((a, b) => a.version - b.version);
}

/** The mode the schema is in: `usage_daily` is a table in plain mode and a continuous aggregate
 *  (a view) in TimescaleDB mode; undefined for a database without meter's schema yet. */
export async function schemaMode(db: Queryable): Promise<Variant | undefined> {
  const [row] = await db.query<{ relkind: string | null }>(
    `SELECT (SELECT relkind FROM pg_class WHERE oid = to_regclass('usage_daily'))::text AS relkind`,
  );
  if (!row?.relkind) return undefined;
  return row.relkind === 'v' ? 'timescale' : 'plain';
}

export class MigrationModeError extends MeterFailure {
  override name = 'MigrationModeError';
}

/** The advisory lock every schema change of a database is made under (mode choice included). */
export const MIGRATE_LOCK = 'meter.migrate';

type LockedConn = Queryable & { exec(sql: string): Promise<void> };

/**
 * Applies pending migrations in order, each in its own transaction, under an advisory lock so
 * two daemons starting together against one database do not race. Returns what it applied.
 * Every row of schema_migrations records which variant of its file was applied: a database is
 * never migrated with the other mode's files (a plain database stays plain until `convert`,
 * which `meter migrate --to-timescale` and a new TimescaleDB database pass).
 */
export async function migrate(
  db: Db,
  migrations = loadMigrations(sqlDir, db.kind),
  opts: { convert?: boolean } = {},
): Promise<Migration[]> {
  return db.withAdvisoryLock(MIGRATE_LOCK, (conn) => migrateLocked(conn, db.kind, migrations, opts));
}

/** migrate() on a connection that already holds MIGRATE_LOCK (the mode was chosen under it). */
export async function migrateLocked(
  conn: LockedConn,
  kind: StoreKind,
  migrations = loadMigrations(sqlDir, kind),
  opts: { convert?: boolean } = {},
): Promise<Migration[]> {
  await conn.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
    version integer PRIMARY KEY,
    name text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
  );
  ALTER TABLE schema_migrations ADD COLUMN IF NOT EXISTS variant text`);
  const want = variantOf(kind);
  const mode = await schemaMode(conn);
  if (mode && mode !== want && !(opts.convert && mode === 'plain' && want === 'timescale')) {
    throw new MigrationModeError(
      mode === 'plain'
        ? 'this database is in plain PostgreSQL mode (usage_daily is a table): `meter migrate --to-timescale` converts it'
        : 'this database is in TimescaleDB mode (usage_daily is a continuous aggregate) and cannot be migrated as plain PostgreSQL',
    );
  }
  const done = new Map(
    (
      await conn.query<{ version: number; variant: string | null }>('SELECT version, variant FROM schema_migrations')
    ).map((r) => [r.version, r.variant]),
  );
  const applied: Migration[] = [];
  for (const m of migrations) {
    if (done.has(m.version)) {
      // Rows written before variants were recorded are plain: only plain files existed then.
      const recorded = done.get(m.version) ?? (m.variant ? 'plain' : null);
      if ((m.variant ?? null) !== recorded) {
        throw new MigrationModeError(
          `migration ${m.version}_${m.name} was applied for ${recorded ?? 'every'} mode, ` +
            `and this database is being migrated as ${want}: refusing to mix the modes' schemas`,
        );
      }
      continue;
    }
    await conn.exec('BEGIN');
    try {
      await conn.exec(m.sql);
      await conn.query('INSERT INTO schema_migrations (version, name, variant) VALUES ($1, $2, $3)', [
        m.version,
        m.name,
        m.variant ?? null,
      ]);
      await conn.exec('COMMIT');
    } catch (err) {
      await conn.exec('ROLLBACK').catch(() => {});
      throw new Error(`migration ${m.version}_${m.name} failed: ${(err as Error).message}`);
    }
    applied.push(m);
  }
  return applied;
}
