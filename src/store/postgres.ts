import pg from 'pg';
import { TEXT_PARSED_OIDS, type Db, type Queryable } from './types.js';

const TEXT_OIDS = new Set<number>(Object.values(TEXT_PARSED_OIDS));
const types = {
  getTypeParser(oid: number, format?: 'text' | 'binary') {
    if (TEXT_OIDS.has(oid)) return (value: string) => value;
    return pg.types.getTypeParser(oid, format as 'text');
  },
};

/** PostgreSQL through a pg Pool (also the base of TimescaleDB mode). */
export function openPostgres(connectionString: string, opts: { max?: number; applicationName?: string } = {}): Db {
  const pool = new pg.Pool({
    connectionString,
    max: opts.max ?? 10,
    application_name: opts.applicationName ?? 'meter',
    connectionTimeoutMillis: 5_000,
    idleTimeoutMillis: 30_000,
    types,
  });
  // An idle client losing its server must not crash the daemon; the next query reconnects.
  pool.on('error', () => {});

  const client = (c: pg.PoolClient) => ({
    async query<T>(sql: string, params?: unknown[]) {
      return (await c.query(sql, params as unknown[])).rows as T[];
    },
    async exec(sql: string) {
      await c.query(sql);
    },
  });

  /** Holds a session-level advisory lock on one pooled connection while fn runs. */
  async function locked<T>(key: string, wait: boolean, fn: (conn: ReturnType<typeof client>) => Promise<T>) {
    const c = await pool.connect();
    try {
      if (wait) await c.query('SELECT pg_advisory_lock(hashtext($1))', [key]);
      else if (!(await c.query('SELECT pg_try_advisory_lock(hashtext($1)) AS ok', [key])).rows[0]?.ok) return undefined;
      try {
        return await fn(client(c));
      } finally {
        await c.query('SELECT pg_advisory_unlock(hashtext($1))', [key]).catch(() => {});
      }
    } finally {
      c.release();
    }
  }

  return {
    kind: 'postgres',
    async query<T>(sql: string, params?: unknown[]) {
      return (await pool.query(sql, params as unknown[])).rows as T[];
    },
    async exec(sql) {
      await pool.query(sql);
    },
    async transaction<T>(fn: (tx: Queryable) => Promise<T>) {
      const c = await pool.connect();
      try {
        await c.query('BEGIN');
        const result = await fn(client(c));
        await c.query('COMMIT');
        return result;
      } catch (err) {
        await c.query('ROLLBACK').catch(() => {});
        throw err;
      } finally {
        c.release();
      }
    },
    // Waiting for the lock, fn always runs: its result is never the "not acquired" undefined.
    withAdvisoryLock: async <T>(key: string, fn: (conn: ReturnType<typeof client>) => Promise<T>) =>
      (await locked(key, true, fn)) as T,
    tryAdvisoryLock: (key, fn) => locked(key, false, fn),
    async ping() {
      try {
        await pool.query('SELECT 1');
        return true;
      } catch {
        return false;
      }
    },
    async close() {
      await pool.end();
    },
  };
}
