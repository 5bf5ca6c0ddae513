import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { describe } from 'vitest';
import { openEmbedded } from '../../src/store/embedded.js';
import { migrate } from '../../src/store/migrate.js';
import { openStore } from '../../src/store/index.js';
import { openPostgres } from '../../src/store/postgres.js';
import type { Db } from '../../src/store/types.js';
import { atFileEnd, dropAtFileEnd, tempDirAtFileEnd } from './cleanup.js';
import { timescaleDatabase } from './timescale.js';

/**
 * PostgreSQL for tests. CI sets METER_TEST_DATABASE_URL and a missing server fails the run;
 * locally the default server is tried and, when it is down, PostgreSQL tests are skipped
 * with a message saying so.
 */
const explicit = process.env.METER_TEST_DATABASE_URL;
const baseUrl = explicit ?? 'postgres://root@127.0.0.1:5432/test';

async function probe(): Promise<string | undefined> {
  const client = new pg.Client({ connectionString: baseUrl, connectionTimeoutMillis: 3_000 });
  try {
    await client.connect();
    await client.query('SELECT 1');
    return baseUrl;
  } catch (err) {
    if (explicit || process.env.CI) {
      throw new Error(`PostgreSQL at METER_TEST_DATABASE_URL is required and unreachable: ${(err as Error).message}`);
    }
    console.warn(
      `PostgreSQL unreachable at ${baseUrl}: PostgreSQL store tests are SKIPPED (${(err as Error).message})`,
    );
    return undefined;
  } finally {
    await client.end().catch(() => {});
  }
}

export const postgresUrl = await probe();

/** A fresh database, dropped when the test file ends (callable from tests and hooks). */
export async function createTestDatabase(): Promise<string> {
  if (!postgresUrl) throw new Error('PostgreSQL is not available');
  const name = `meter_t_${randomBytes(5).toString('hex')}`;
  const admin = new pg.Client({ connectionString: postgresUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(postgresUrl);
  url.pathname = `/${name}`;
  dropAtFileEnd(url.toString());
  return url.toString();
}

/** A fresh temporary directory, removed when the test file ends. */
export const tempDir = tempDirAtFileEnd;

export interface Backend {
  name: 'postgres' | 'embedded' | 'timescale';
  /** Opens a fresh, migrated store of this back-end, closed when the test file ends. */
  open(): Promise<Db>;
  /** Store configuration for a daemon or CLI process using a fresh store. */
  config(): Promise<{ databaseUrl?: string; dataDir: string }>;
}

export const backends: Backend[] = [
  {
    name: 'embedded',
    async open() {
      const db = await openEmbedded(tempDir());
      atFileEnd(() => db.close());
      await migrate(db);
      return db;
    },
    async config() {
      return { dataDir: tempDir() };
    },
  },
  {
    name: 'postgres',
    async open() {
      const db = openPostgres(await createTestDatabase());
      atFileEnd(() => db.close());
      await migrate(db);
      return db;
    },
    async config() {
      return { databaseUrl: await createTestDatabase(), dataDir: tempDir() };
    },
  },
];

/** TimescaleDB mode on the test engine (test/helpers/timescale.ts), through the daemon's own
 *  path: openStore chooses the mode from the database, with a pool of one connection. Opt-in
 *  per suite (the WASM engine is slow to start): describeEachBackend(…, { timescale: true }). */
export const timescaleBackend: Backend = {
  name: 'timescale',
  async open() {
    const db = await openStore({ databaseUrl: await timescaleDatabase(), dataDir: tempDir(), dbPoolMax: 1 });
    atFileEnd(() => db.close());
    if (db.kind !== 'timescale') throw new Error(`the TimescaleDB test engine opened in ${db.kind} mode`);
    return db;
  },
  async config() {
    return { databaseUrl: await timescaleDatabase(), dataDir: tempDir() };
  },
};

/** Runs the same suite against every back-end; PostgreSQL's is skipped (and says so) only
 *  locally when no server answers. */
export function describeEachBackend(
  title: string,
  suite: (backend: Backend) => void,
  opts: { timescale?: boolean } = {},
): void {
  for (const backend of opts.timescale ? [...backends, timescaleBackend] : backends) {
    const skip = backend.name === 'postgres' && !postgresUrl;
    describe.skipIf(skip)(`${title} [${backend.name}]`, () => suite(backend));
  }
}
