import pg from 'pg';
import { TEXT_PARSED_OIDS, type Db, type Queryable, type QueryOptions } from './types.js';

const TEXT_OIDS = new Set<number>(Object.values(TEXT_PARSED_OIDS));
const types = {
  getTypeParser(oid: number, format?: 'text' | 'binary') {
    if (TEXT_OIDS.has(oid)) return (value: string) => value;
    return pg.types.getTypeParser(oid, format as 'text');
  },
};

/**
 * A new connection's setup, in one round trip (an idle sidecar reconnects at every pulse):
 * - no JIT for this service's statements: they are short (index lookups, rollup reads, batch
 *   inserts), and once the event batch's estimate passes jit_above_cost LLVM spends up to a
 *   second compiling a statement that runs in milliseconds. Set here, not as a startup option,
 *   which poolers such as PgBouncer refuse;
 * - a session pooler (or the TimescaleDB test engine) may hand it a session that still holds
 *   meter's named statements from an earlier one; pg, knowing none on its new client, would
 *   PREPARE again and fail with 42P05. Meter's names (QueryOptions.name) all start with
 *   `meter_`: those, and only those, are dropped before the connection is used.
 */
async function setUpConnection(c: pg.ClientBase): Promise<void> {
  const results = (await c.query(
    `SET jit = off; SELECT name FROM pg_prepared_statements WHERE name LIKE 'meter\\_%'`,
  )) as unknown as pg.QueryResult<{ name: string }>[];
  for (const { name } of results[1]!.rows) await c.query(`DEALLOCATE ${c.escapeIdentifier(name)}`);
}

/** PostgreSQL through a pg Pool (also the base of TimescaleDB mode). */
export function openPostgres(
  connectionString: string,
  opts: { max?: number; idleMs?: number; applicationName?: string } = {},
): Db {
  const pool = new pg.Pool({
    connectionString,
    max: opts.max ?? 10,
    application_name: opts.applicationName ?? 'meter',
    connectionTimeoutMillis: 5_000,
    // The daemon closes a connection unused for METER_DB_IDLE_MS (1 s): an idle sidecar, whose
    // only statement is its pulse every 2 s, then holds none most of the time (docs/fleet.md).
    idleTimeoutMillis: opts.idleMs ?? 30_000,
    types,
    onConnect: setUpConnection,
  });
  // An idle client losing its server must not crash the daemon; the next query reconnects.
  pool.on('error', () => {});

  /** pg's query config: a named statement is parsed and planned once per connection. */
  const statement = (text: string, params: unknown[] | undefined, opts: QueryOptions | undefined) =>
    opts?.name ? { name: opts.name, text, values: params } : { text, values: params };

  const client = (c: pg.PoolClient) => ({
    async query<T>(sql: string, params?: unknown[], opts?: QueryOptions) {
      return (await c.query(statement(sql, params, opts))).rows as T[];
    },
    async exec(sql: string) {
      await c.query(sql);
    },
  });

  /**
   * Checks a client out for fn, listening for its 'error' while it is held: pg emits 'error' on
   * a checked-out client whose connection dies mid-statement (pool.on('error') covers only idle
   * clients), and an unheard 'error' event ends the process. A client whose connection broke, or
   * whose state is unknown (a failed ROLLBACK or unlock), goes back with an error, so the pool
   * discards it instead of handing it out again.
   */
  async function hold<T>(fn: (c: pg.PoolClient, discard: (err: Error) => void) => Promise<T>): Promise<T> {
    const c = await pool.connect();
    let broken: Error | undefined;
    const discard = (err: Error) => {
      broken ??= err;
    };
    c.on('error', discard);
    try {
      return await fn(c, discard);
    } finally {
      c.off('error', discard);
      c.release(broken ?? false);
    }
  }

  /** Holds a session-level advisory lock on one pooled connection while fn runs. */
  function locked<T>(key: string, wait: boolean, fn: (conn: ReturnType<typeof client>) => Promise<T>) {
    return hold(async (c, discard) => {
      if (wait) await c.query('SELECT pg_advisory_lock(hashtext($1))', [key]);
      else if (!(await c.query('SELECT pg_try_advisory_lock(hashtext($1)) AS ok', [key])).rows[0]?.ok) return undefined;
      try {
        return await fn(client(c));
      } finally {
        // A session that may still hold the lock must not go back to the pool.
        await c.query('SELECT pg_advisory_unlock(hashtext($1))', [key]).catch(discard);
      }
    });
  }

  return {
    kind: 'postgres',
    async query<T>(sql: string, params?: unknown[], opts?: QueryOptions) {
      return (await pool.query(statement(sql, params, opts))).rows as T[];
    },
    async exec(sql) {
      await pool.query(sql);
    },
    transaction: <T>(fn: (tx: Queryable) => Promise<T>) =>
      hold(async (c, discard) => {
        await c.query('BEGIN');
        try {
          const result = await fn(client(c));
          await c.query('COMMIT');
          return result;
        } catch (err) {
          await c.query('ROLLBACK').catch(discard);
          throw err;
        }
      }),
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
