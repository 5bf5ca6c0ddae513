import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { packageRoot, sqlDir } from '../paths.js';
import { migrate } from './migrate.js';
import type { Db, Queryable } from './types.js';

/**
 * A new embedded store starts from a pre-built data directory instead of running initdb and
 * every migration (PGlite's initdb alone takes seconds and runs a second PostgreSQL instance).
 * `npm run build` makes it: an in-memory PGlite with all migrations applied, dumped as a
 * gzipped tar. It is used only while its fingerprint (PGlite's version and the text of every
 * migration) matches, so a changed migration never starts from a stale template; pending
 * migrations still run after it as on any store.
 */
export const defaultTemplateDir = join(packageRoot, 'dist', 'embedded-template');
const TAR = 'pgdata.tar.gz';
const FINGERPRINT = 'fingerprint';

function pgliteVersion(): string {
  let dir = dirname(createRequire(import.meta.url).resolve('@electric-sql/pglite'));
  while (!existsSync(join(dir, 'package.json'))) dir = dirname(dir);
  return (JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { version: string }).version;
}

export function templateFingerprint(): string {
  const h = createHash('sha256').update(`pglite ${pgliteVersion()}\0`);
  for (const file of readdirSync(sqlDir).sort())
    h.update(file)
      .update('\0')
      .update(readFileSync(join(sqlDir, file)))
      .update('\0');
  return h.digest('hex');
}

const usable = new Map<string, string | undefined>();

/** The template's tar when it is there and matches the migrations, else undefined (initdb). */
export function usableTemplate(dir = defaultTemplateDir): string | undefined {
  if (!usable.has(dir)) {
    let found: string | undefined;
    try {
      if (readFileSync(join(dir, FINGERPRINT), 'utf8').trim() === templateFingerprint()) found = join(dir, TAR);
    } catch {
      // not built (a checkout without `npm run build`): a new store runs initdb
    }
    usable.set(dir, found);
  }
  return usable.get(dir);
}

/** Builds the template in `dir` (written aside, then renamed, the fingerprint last). */
export async function buildTemplate(dir = defaultTemplateDir): Promise<void> {
  const { PGlite } = await import('@electric-sql/pglite');
  const pg = await PGlite.create();
  try {
    const conn: Queryable & { exec(sql: string): Promise<void> } = {
      query: async <T>(sql: string, params?: unknown[]) => (await pg.query<T>(sql, params)).rows,
      exec: async (sql: string) => {
        await pg.exec(sql);
      },
    };
    const db = {
      kind: 'embedded',
      ...conn,
      withAdvisoryLock: (_key: string, fn: (c: typeof conn) => Promise<unknown>) => fn(conn),
    } as unknown as Db;
    await migrate(db);
    const tar = Buffer.from(await (await pg.dumpDataDir('gzip')).arrayBuffer());
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, `${TAR}.tmp`), tar);
    renameSync(join(dir, `${TAR}.tmp`), join(dir, TAR));
    writeFileSync(join(dir, FINGERPRINT), templateFingerprint() + '\n');
    usable.delete(dir);
  } finally {
    await pg.close();
  }
}
