import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { sqlDir } from '../paths.js';
import type { Db } from './types.js';

export interface Migration {
  version: number;
  name: string;
  sql: string;
}

/** Numbered plain SQL files: `001_init.sql`, `002_…`. A name ending `.plain.sql` applies only
 *  where rollups are tables the writer maintains (postgres, embedded); `.timescale.sql` only on
 *  TimescaleDB, where the same version builds continuous aggregates instead. */
export function loadMigrations(dir = sqlDir, kind?: Db['kind']): Migration[] {
  const seen = new Map<number, string>();
  return readdirSync(dir)
    .map((file) => /^(\d+)_([\w-]+?)(?:\.(plain|timescale))?\.sql$/.exec(file))
    .filter((m): m is RegExpExecArray => m !== null)
    .filter((m) => !m[3] || !kind || m[3] === (kind === 'timescale' ? 'timescale' : 'plain'))
    .map((m) => {
      const version = Number(m[1]);
      const other = seen.get(version);
      if (other) throw new Error(`migrations ${other} and ${m[0]} share version ${version}`);
      seen.set(version, m[0]);
      return { version, name: m[2]!, sql: readFileSync(join(dir, m[0]), 'utf8') };
    })
    .sort((a, b) => a.version - b.version);
}

/** Applies pending migrations in order, each in its own transaction, under an advisory lock so
 *  two daemons starting together against one database do not race. Returns what it applied. */
export async function migrate(db: Db, migrations = loadMigrations(sqlDir, db.kind)): Promise<Migration[]> {
  return db.withAdvisoryLock('meter.migrate', async (conn) => {
    await conn.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
      version integer PRIMARY KEY,
      name text NOT NULL,
      applied_at timestamptz NOT NULL DEFAULT now()
    )`);
    const done = new Set(
      (await conn.query<{ version: number }>('SELECT version FROM schema_migrations')).map((r) => r.version),
    );
    const applied: Migration[] = [];
    for (const m of migrations) {
      if (done.has(m.version)) continue;
      await conn.exec('BEGIN');
      try {
        await conn.exec(m.sql);
        await conn.query('INSERT INTO schema_migrations (version, name) VALUES ($1, $2)', [m.version, m.name]);
        await conn.exec('COMMIT');
      } catch (err) {
        await conn.exec('ROLLBACK').catch(() => {});
        throw new Error(`migration ${m.version}_${m.name} failed: ${(err as Error).message}`);
      }
      applied.push(m);
    }
    return applied;
  });
}
