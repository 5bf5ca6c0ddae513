import { PeriodicTask } from '../periodic.js';
import { timingSafeEqual } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import type { Logger } from '../log.js';
import type { Queryable } from '../store/types.js';
import { parseServiceKey, secretMatches, serviceKeyFromHeaders } from './key-format.js';
import type { Authenticator, Principal } from './types.js';

interface KeyRecord {
  hash: Buffer;
  /** The secret (UTF-8) that last matched `hash`: a call that brings it again is compared with
   *  it in constant time instead of hashing (a SHA-256 costs 1 µs on a busy core, ~9 µs on an
   *  idle one, on every call). A record replaced by a refresh starts without it. */
  matched?: Buffer;
  /** false once revoked; an expiring key works until `expiresAt`. */
  revoked: boolean;
  expiresAt: number;
  principal: Principal;
}

interface KeyRow {
  id: string;
  account_id: string;
  account_name: string;
  plan: string;
  secret_hash: string;
  revoked: boolean;
  expires_at: unknown;
  changed_at: unknown;
}

export interface KeyCacheOptions {
  /** How often changed keys and accounts are re-read (config.keyRefreshMs). */
  refreshMs: number;
  logger?: Pick<Logger, 'warn'>;
  /** How long an id the store does not know is answered from memory. */
  negativeTtlMs?: number;
  /** Store lookups for unknown ids in flight at once; more are refused (401) meanwhile. */
  maxMissLookups?: number;
}

const SELECT_KEYS = `
  SELECT k.id, k.account_id::text AS account_id, a.name AS account_name, a.plan,
         encode(k.secret_hash, 'hex') AS secret_hash, k.revoked_at IS NOT NULL AS revoked,
         k.expires_at, GREATEST(k.updated_at, a.updated_at) AS changed_at
  FROM api_keys k JOIN accounts a ON a.id = k.account_id`;
/** Changes committed late (a transaction that began before the last refresh) are still seen. */
const OVERLAP = `interval '30 seconds'`;
const MAX_NEGATIVE = 10_000;

/**
 * Service keys in memory: the hot path never waits on the store for a known key. Changed keys
 * and accounts are re-read every `refreshMs` by `updated_at`, deleted ones from the deletions
 * table (a revocation or deletion reaches every sidecar within one refresh); an id not in memory is looked up once (a new key works at once),
 * and ids the store does not know are remembered for a while so a flood of bad keys costs
 * the store almost nothing.
 */
export class KeyCache implements Authenticator {
  private readonly keys = new Map<string, KeyRecord>();
  private readonly unknown = new Map<string, number>();
  private readonly inFlight = new Map<string, Promise<KeyRecord | undefined>>();
  private watermark: unknown;
  /** Its own re-read, until the change watcher takes over (followChanges). */
  private loop: PeriodicTask | undefined;
  private refreshing: Promise<void> | undefined;
  private readonly negativeTtlMs: number;
  private readonly maxMissLookups: number;
  /** Date.now() of the last successful read of the store (for /metrics). */
  private refreshedAt = 0;

  constructor(
    private readonly db: Queryable,
    private readonly opts: KeyCacheOptions,
  ) {
    this.negativeTtlMs = opts.negativeTtlMs ?? 10_000;
    this.maxMissLookups = opts.maxMissLookups ?? 4;
  }

  /** Loads every working key, then refreshes on a timer. */
  async start(): Promise<void> {
    const [now] = await this.db.query<{ t: unknown }>('SELECT now() AS t');
    const rows = await this.db.query<KeyRow>(
      `${SELECT_KEYS} WHERE k.revoked_at IS NULL AND (k.expires_at IS NULL OR k.expires_at > now())`,
    );
    for (const row of rows) this.put(row);
    this.watermark = now!.t;
    this.refreshedAt = Date.now();
    // Keys keep working from memory while the store is away; revocations wait for it.
    this.loop = new PeriodicTask(() => this.reread(), {
      what: 'service keys: refresh',
      logger: this.opts.logger ?? { warn: () => {} },
      pauseMs: this.opts.refreshMs,
    });
    void this.loop.start('after-pause');
  }

  async stop(): Promise<void> {
    await this.loop?.stop();
    this.loop = undefined;
    await this.refreshing;
  }

  /** Re-reads keys and accounts changed since the last refresh. Never throws. */
  refresh(): Promise<void> {
    return this.reread().catch((err: unknown) => {
      // Keys keep working from memory while the store is away; revocations wait for it.
      this.opts.logger?.warn({ err: { message: (err as Error).message } }, 'service keys: refresh failed');
    });
  }

  /** The daemon's change watcher re-reads keys when the fleet's change counter moved (one read
   *  for every kept table), in place of this cache's own timer. */
  followChanges(): void {
    void this.loop?.stop();
    this.loop = undefined;
  }

  /** The change watcher found nothing changed: what is in memory is current as of now. */
  confirm(): void {
    this.refreshedAt = Date.now();
  }

  /** Like refresh, but a failure rejects (the change watcher then tries again). */
  reread(): Promise<void> {
    this.refreshing ??= this.readChanges().finally(() => (this.refreshing = undefined));
    return this.refreshing;
  }

  private async readChanges(): Promise<void> {
    {
      const rows = await this.db.query<KeyRow>(
        `${SELECT_KEYS} WHERE k.updated_at > $1::timestamptz - ${OVERLAP} OR a.updated_at > $1::timestamptz - ${OVERLAP}`,
        [this.watermark],
      );
      // Rows that are gone never show as changed: deletions are recorded (sql/080_deletions.sql).
      const gone = await this.db.query<{ kind: string; id: string; changed_at: unknown }>(
        `SELECT kind, id, deleted_at AS changed_at FROM deletions WHERE deleted_at > $1::timestamptz - ${OVERLAP}`,
        [this.watermark],
      );
      let watermark = this.watermark;
      const later = (t: unknown) => {
        if (new Date(t as string).getTime() > new Date(watermark as string).getTime()) watermark = t;
      };
      for (const row of rows) {
        this.put(row);
        later(row.changed_at);
      }
      this.forget(
        gone.filter((g) => g.kind === 'key').map((g) => g.id),
        gone.filter((g) => g.kind === 'account').map((g) => g.id),
      );
      for (const g of gone) later(g.changed_at);
      this.watermark = watermark;
      this.refreshedAt = Date.now();
    }
  }

  /** Drops deleted keys and every key of a deleted account (a key recreated since is re-read
   *  on its next use). */
  private forget(keyIds: string[], accountIds: string[]): void {
    for (const id of keyIds) this.keys.delete(id);
    if (accountIds.length === 0) return;
    const accounts = new Set(accountIds);
    for (const [id, record] of this.keys) if (accounts.has(record.principal.accountId)) this.keys.delete(id);
  }

  private put(row: KeyRow): KeyRecord {
    const expires = row.expires_at === null ? Infinity : new Date(row.expires_at as string).getTime();
    const record: KeyRecord = {
      hash: Buffer.from(row.secret_hash, 'hex'),
      revoked: row.revoked,
      expiresAt: expires,
      principal: Object.freeze({
        keyId: row.id,
        accountId: row.account_id,
        accountName: row.account_name,
        plan: row.plan,
      }),
    };
    this.keys.set(row.id, record);
    this.unknown.delete(row.id);
    return record;
  }

  /** Seconds since keys were last read from the store: a revocation takes effect within this. */
  ageSeconds(): number {
    return this.refreshedAt === 0 ? 0 : (Date.now() - this.refreshedAt) / 1000;
  }

  authenticate(headers: IncomingHttpHeaders): Principal | undefined | Promise<Principal | undefined> {
    const found = serviceKeyFromHeaders(headers);
    return found ? this.authenticateToken(found.token) : undefined;
  }

  /** Synchronous for every key in memory; a Promise only when the store must be asked. */
  authenticateToken(token: string): Principal | undefined | Promise<Principal | undefined> {
    const parts = parseServiceKey(token);
    if (!parts) return undefined;
    const record = this.keys.get(parts.id);
    if (record) return verify(record, parts.secret);
    const until = this.unknown.get(parts.id);
    if (until !== undefined) {
      if (until > Date.now()) return undefined;
      this.unknown.delete(parts.id);
    }
    return this.lookup(parts.id).then((r) => (r ? verify(r, parts.secret) : undefined));
  }

  private lookup(id: string): Promise<KeyRecord | undefined> {
    const pending = this.inFlight.get(id);
    if (pending) return pending;
    if (this.inFlight.size >= this.maxMissLookups) return Promise.resolve(undefined);
    const p = this.db
      .query<KeyRow>(`${SELECT_KEYS} WHERE k.id = $1`, [id])
      .then((rows) => {
        if (rows[0]) return this.put(rows[0]);
        if (this.unknown.size >= MAX_NEGATIVE) this.unknown.clear();
        this.unknown.set(id, Date.now() + this.negativeTtlMs);
        return undefined;
      })
      .catch((err: Error) => {
        this.opts.logger?.warn({ err: { message: err.message } }, 'service keys: lookup failed');
        return undefined;
      })
      .finally(() => this.inFlight.delete(id));
    this.inFlight.set(id, p);
    return p;
  }
}

function verify(record: KeyRecord, secret: string): Principal | undefined {
  if (record.revoked || record.expiresAt <= Date.now()) return undefined;
  const given = Buffer.from(secret);
  const known = record.matched;
  if (known && known.length === given.length && timingSafeEqual(known, given)) return record.principal;
  if (!secretMatches(secret, record.hash)) return undefined;
  record.matched = given;
  return record.principal;
}

/**
 * The key cache a part authenticates with: the one its owner passes in (the daemon's, which
 * composeDaemon starts and stops), else one of the part's own, started now and stopped by
 * `release`.
 */
export async function keyCacheFor(
  db: Queryable,
  opts: KeyCacheOptions,
  given: KeyCache | undefined,
): Promise<{ cache: KeyCache; release(): Promise<void> }> {
  if (given) return { cache: given, release: async () => {} };
  const cache = new KeyCache(db, opts);
  await cache.start();
  return { cache, release: () => cache.stop() };
}
