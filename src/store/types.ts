/** The store's seam: both back-ends speak PostgreSQL SQL, so every repository above this
 *  interface is written once. TimescaleDB is a third implementation of the same seam. */
export type StoreKind = 'postgres' | 'embedded' | 'timescale';

export interface QueryOptions {
  /** A statement run again and again with the same text (the event batch): parsed and planned
   *  once per connection under this name (a lower-case SQL identifier starting with `meter_`,
   *  which a reused session's leftovers are cleared by: src/store/postgres.ts). */
  name?: string;
}

export interface Queryable {
  /** One statement with $1… parameters; returns its rows. */
  query<T = Record<string, unknown>>(sql: string, params?: unknown[], opts?: QueryOptions): Promise<T[]>;
}

export interface Db extends Queryable {
  readonly kind: StoreKind;
  /** A multi-statement script without parameters (migrations). */
  exec(sql: string): Promise<void>;
  /** Runs fn inside BEGIN/COMMIT on one connection; ROLLBACK when it throws. */
  transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T>;
  /** Runs fn while holding a session-level advisory lock on one connection. */
  withAdvisoryLock<T>(
    key: string,
    fn: (conn: Queryable & { exec(sql: string): Promise<void> }) => Promise<T>,
  ): Promise<T>;
  /** Like withAdvisoryLock, but when another session holds the lock it returns undefined at
   *  once instead of waiting (jobs that one sidecar of a fleet runs at a time). */
  tryAdvisoryLock<T>(
    key: string,
    fn: (conn: Queryable & { exec(sql: string): Promise<void> }) => Promise<T>,
  ): Promise<T | undefined>;
  /** true when the database answers. */
  ping(): Promise<boolean>;
  /** Embedded store only: how many statements it has run that may have changed data. Its
   *  process is the database's only client (the lock file), so while the count stands still a
   *  re-read finds what the last one found (see RereadSkip). PostgreSQL has none: other
   *  sidecars write there unseen. */
  writes?(): number;
  close(): Promise<void>;
}

/** Types are read as strings where JS numbers would lose precision or shift dates:
 *  NUMERIC (money), INT8 (counters) and DATE (UTC calendar days). */
export const TEXT_PARSED_OIDS = { int8: 20, numeric: 1700, date: 1082 } as const;
