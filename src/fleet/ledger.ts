import { randomUUID } from 'node:crypto';
import type { Logger } from '../log.js';
import type { Db, Queryable } from '../store/types.js';
import { Lease, MINUTE_MS, type LimitSpec } from './lease.js';

export interface LedgerOptions {
  /** A lease lapses this long after its last statement unless renewed (a dead sidecar's slice
   *  comes back to the fleet after it). */
  ttlMs: number;
  /** How often a sidecar holding leases looks for a sidecar that wants room, gives back what
   *  it does not use, and renews what it does. */
  syncMs: number;
  /** A slice unused this long goes back to the fleet. */
  idleMs: number;
}

export const DEFAULT_LEDGER: LedgerOptions = { ttlMs: 10_000, syncMs: 250, idleMs: 1_000 };

/** What one call needs of one limit: units, or `rest` (all the fleet has left: a call whose
 *  worst case cannot be known). `overdraw` (a block budget that is not strict, CONTRACT §6):
 *  the call is admitted while any of the limit is left, and its units are then held whole,
 *  past the limit if need be, so every sidecar sees them. */
export interface Need {
  spec: LimitSpec;
  units: bigint | 'rest';
  overdraw?: boolean;
}

export type Verdict = { ok: true } | { ok: false; limit: LimitSpec; offline: boolean };

const POLL_MS = 50;
/** The local end of a lease comes this much before the database's, whatever the round trip. */
const MARGIN_MS = 2_000;

/**
 * This sidecar's share of every fleet limit it serves (docs/fleet.md). Calls are admitted
 * against leased slices in memory; a slice running low is topped up in the background by one
 * short transaction under the limit's advisory lock, which grants only what the database's
 * count, the other sidecars' slices and this sidecar's own spending leave. Only when a slice
 * cannot cover a call does the call wait: for one statement, or, when other sidecars hold
 * unused slices, until they give them back (at their next sync) or the wait bound passes.
 */
export class FleetLedger {
  readonly holder = randomUUID();
  readonly #leases = new Map<string, Lease>();
  readonly #calls = new Map<string, Lease[]>();
  #timer: NodeJS.Timeout | undefined;
  /** The pass under way: a second one waits for it (one pass at a time). */
  #syncing: Promise<void> | undefined;
  #warned = false;
  #downUntil = 0;
  /** For /metrics: lease statements run and failed, calls that waited for the database. */
  readonly stats = { statements: 0, failures: 0, waits: 0 };

  constructor(
    private readonly db: Db,
    private readonly logger: Pick<Logger, 'warn' | 'info' | 'error'>,
    readonly opts: LedgerOptions = DEFAULT_LEDGER,
  ) {}

  /** How long a call may wait for room at most: one sync of the other sidecars, and the
   *  statements on either side of it. */
  get waitMs(): number {
    return 4 * this.opts.syncMs + 500;
  }

  lease(spec: LimitSpec): Lease {
    const id = `${spec.key}@${spec.windowStart}`;
    let lease = this.#leases.get(id);
    if (!lease) this.#leases.set(id, (lease = new Lease(spec)));
    else lease.spec = spec; // the amount may have changed (a plan or override edited)
    return lease;
  }

  /** Admits a call against every limit it needs, all or nothing. Synchronous while the slices
   *  cover it (the steady state); otherwise a promise that settles after the database answers. */
  admit(callId: string, needs: Need[], now = Date.now()): Verdict | Promise<Verdict> {
    const leases = needs.map((n) => this.lease(n.spec));
    if (this.#tryTakeAll(callId, needs, leases, now)) return { ok: true };
    this.stats.waits++;
    return this.#admitSlowly(callId, needs, leases);
  }

  #units(need: Need, lease: Lease): bigint {
    if (need.units !== 'rest') return need.units;
    const rest = lease.remaining();
    return rest > 0n ? rest : 1n;
  }

  #tryTakeAll(callId: string, needs: Need[], leases: Lease[], now: number): boolean {
    for (let i = 0; i < needs.length; i++) {
      if (leases[i]!.available(now) < this.#units(needs[i]!, leases[i]!)) return false;
    }
    for (let i = 0; i < needs.length; i++) {
      const lease = leases[i]!;
      lease.take(callId, this.#units(needs[i]!, lease), now);
      // Top up before the slice runs out, so the next call does not wait.
      if (!lease.offline && lease.pending === 0 && lease.free * 2n < lease.recent)
        void this.#statement(lease, 0n).catch(() => {});
    }
    this.#calls.set(callId, leases);
    this.#schedule();
    return true;
  }

  async #admitSlowly(callId: string, needs: Need[], leases: Lease[]): Promise<Verdict> {
    for (let round = 0; round < 5; round++) {
      if (round > 0) leases = needs.map((n) => this.lease(n.spec));
      const now = Date.now();
      const lacking = leases.flatMap((lease, i) => {
        const units = this.#units(needs[i]!, lease);
        return lease.available(now) >= units ? [] : [this.#obtain(lease, units, needs[i]!.overdraw === true)];
      });
      const refused = (await Promise.all(lacking)).find((v) => !v.ok);
      if (refused) return refused;
      if (this.#tryTakeAll(callId, needs, leases, Date.now())) return { ok: true };
    }
    const short = needs.find((n, i) => leases[i]!.available(Date.now()) < this.#units(n, leases[i]!))!;
    return { ok: false, limit: short.spec, offline: false };
  }

  /** Asks the database until the slice covers `units`, the fleet has no room for them (with
   *  `overdraw`: no room at all), or the wait bound passes. */
  async #obtain(lease: Lease, units: bigint, overdraw: boolean): Promise<Verdict> {
    const started = Date.now();
    const deadline = started + this.waitMs;
    lease.waiting += units;
    try {
      for (;;) {
        // A statement already on its way may bring enough for this call too.
        if (lease.pending > 0) {
          await lease.busy;
          if (lease.available(Date.now()) >= units) return { ok: true };
        }
        try {
          if (Date.now() < this.#downUntil) throw new Error('database unreachable (retried shortly)');
          await this.#statement(lease, units, overdraw);
        } catch (err) {
          this.#unreachable(err);
          lease.offline = true;
          if (lease.available(Date.now()) >= units) return { ok: true };
          return { ok: false, limit: lease.spec, offline: true };
        }
        const now = Date.now();
        if (lease.available(now) >= units) return { ok: true };
        const refused: Verdict = { ok: false, limit: lease.spec, offline: false };
        const least = overdraw ? 1n : units;
        // What the database counts leaves no room, or no other sidecar holds anything: final.
        if (lease.spec.amount - lease.used < least || lease.othersGranted === 0n) return refused;
        // Other sidecars hold slices, and what they spent may have shrunk since they last wrote:
        // they give back and write afresh at their next sync, then the figures decide.
        if (now - started >= 2 * this.opts.syncMs && lease.remaining() < least) return refused;
        if (now >= deadline) return refused;
        await new Promise((r) => setTimeout(r, POLL_MS));
      }
    } finally {
      lease.waiting -= units;
      // No one waits any more: stop asking the fleet for room.
      if (lease.waiting === 0n && lease.wanting > 0n) void this.#statement(lease, 0n).catch(() => {});
    }
  }

  /** The call's usage event was recorded: real units replace its reservation. */
  settle(callId: string, units: (spec: LimitSpec) => bigint | undefined, time: string): void {
    const leases = this.#calls.get(callId);
    if (!leases) return;
    this.#calls.delete(callId);
    for (const lease of leases) lease.settle(callId, units(lease.spec), time);
  }

  /** The call made no usage event: every unit it took comes back. */
  release(callId: string): void {
    const leases = this.#calls.get(callId);
    if (!leases) return;
    this.#calls.delete(callId);
    for (const lease of leases) lease.release(callId);
  }

  /** One lease statement, after any running one for the same lease. */
  #statement(lease: Lease, need: bigint, overdraw = false): Promise<void> {
    lease.pending++;
    const grant = () => this.#grant(lease, need, need > lease.waiting ? need : lease.waiting, overdraw);
    const run = lease.busy
      .then(grant, grant)
      .then(
        () => void this.stats.statements++,
        (err: unknown) => {
          this.stats.failures++;
          throw err;
        },
      )
      .finally(() => lease.pending--);
    lease.busy = run.catch(() => {});
    return run;
  }

  /**
   * Under the limit's lock: what the database counts (and which of this sidecar's ended calls
   * it shows), what the other sidecars hold, then this sidecar's new slice. `need`: units a
   * waiting call needs; 0 to renew, top up or give back. `overdraw`: the call may take its
   * units whole while any of the limit is left.
   */
  async #grant(lease: Lease, need: bigint, total: bigint, overdraw: boolean): Promise<void> {
    const { spec } = lease;
    const started = Date.now();
    const ended = lease.ended();
    const used = spec.used ?? { sql: 'SELECT 0', params: [] };
    const n = used.params.length;
    const window = new Date(spec.windowStart).toISOString();
    await this.db.transaction(async (tx) => {
      await tx.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [`meter:fleet:${spec.key}@${window}`]);
      const [row] = await tx.query<Figures>(
        `WITH gone AS (
           DELETE FROM fleet_leases WHERE limit_key = $${n + 1}
              AND (window_start < $${n + 2} OR expires_at < now() - $${n + 4} * interval '1 millisecond')),
         peers AS (
           -- A lapsed lease (its sidecar died or lost the database) still counts for the grace
           -- period: per-minute slots all it was granted (any may have been used in its last
           -- minute), other limits what it had spent when it last wrote.
           SELECT expires_at > now() AS live, granted,
                  CASE WHEN expires_at <= now() AND $${n + 7}::boolean THEN granted ELSE held END AS held
             FROM fleet_leases
            WHERE limit_key = $${n + 1} AND window_start = $${n + 2} AND holder <> $${n + 3}
              AND expires_at >= now() - $${n + 4} * interval '1 millisecond')
         SELECT (${used.sql})::text AS used,
                (SELECT COALESCE(sum(CASE WHEN live THEN granted ELSE held END), 0) FROM peers)::text AS others_granted,
                (SELECT COALESCE(sum(held), 0) FROM peers)::text AS others_held,
                (SELECT COALESCE(array_agg(e.event_id::text), '{}') FROM usage_events e
                   JOIN unnest($${n + 5}::timestamptz[], $${n + 6}::uuid[]) AS p(time, id)
                     ON e.time = p.time AND e.event_id = p.id) AS seen`,
        [
          ...used.params,
          spec.key,
          window,
          this.holder,
          // A lapsed lease still counts for a while: a minute for per-minute slots (their calls'
          // minute), one more lease period for spend and calls (events its sidecar had not
          // written when it last wrote; the database shows the rest by then).
          spec.kind === 'minute' ? MINUTE_MS : this.opts.ttlMs,
          ended.map((e) => e.time),
          ended.map((e) => e.id),
          spec.kind === 'minute',
        ],
      );
      // One synchronous step: the figures and the events they hold change together.
      lease.seen(row!.seen);
      lease.cool(Date.now());
      lease.used = BigInt(row!.used);
      lease.othersGranted = BigInt(row!.others_granted);
      lease.othersHeld = BigInt(row!.others_held);
      const granted = this.#slice(lease, need, total, started, overdraw);
      const wants = granted - lease.held < need && lease.othersGranted > 0n ? total : 0n;
      // A smaller slice applies at once; a larger one once it is committed.
      const before = lease.granted;
      if (granted < before) lease.granted = granted;
      await this.#write(tx, lease, granted, wants, window);
      lease.granted = granted;
      lease.wanting = wants;
    });
    lease.validUntil = started + this.opts.ttlMs - MARGIN_MS;
    lease.offline = false;
    this.#warned = false;
    this.#downUntil = 0;
  }

  /** The slice to hold: what is spent, plus what the next calls need, within what is left. */
  #slice(lease: Lease, need: bigint, total: bigint, now: number, overdraw: boolean): bigint {
    const { spec } = lease;
    const unleased = spec.amount - lease.used - lease.othersGranted - lease.held;
    const idle = now - lease.lastTake >= this.opts.idleMs && total === 0n;
    let free: bigint;
    if (idle || this.#stopping) free = 0n;
    else if (now < lease.tightUntil) free = total;
    else {
      // The recent pace twice over, or a hundredth of the limit; never more than half of what
      // is left while that leaves what the waiting calls need, so other sidecars find room too.
      const pace = lease.recent * 2n > spec.amount / 100n ? lease.recent * 2n : spec.amount / 100n;
      const want = total + pace;
      const half = unleased / 2n > total ? unleased / 2n : total;
      free = want < half ? want : half;
    }
    lease.recent = 0n;
    if (free > unleased) free = unleased;
    // A slice that cannot cover even the call that asked is not taken: two sidecars each holding
    // part of what both wait for would each wait for the other.
    if (free < 0n || free < need) free = 0n;
    // Spend and the fleet's calls in flight leave some room: the call is granted its whole units,
    // past the limit, and the row written says so to every other sidecar.
    if (overdraw && free < need && unleased > 0n) free = need;
    return lease.held + free;
  }

  async #write(tx: Queryable, lease: Lease, granted: bigint, wants: bigint, window: string): Promise<void> {
    const params = [lease.spec.key, window, this.holder];
    if (granted === 0n && lease.held === 0n && wants === 0n) {
      await tx.query('DELETE FROM fleet_leases WHERE limit_key = $1 AND window_start = $2 AND holder = $3', params);
      return;
    }
    await tx.query(
      `INSERT INTO fleet_leases (limit_key, window_start, holder, granted, held, wants, expires_at)
       VALUES ($1, $2, $3, $4, $5, $6, now() + $7 * interval '1 millisecond')
       ON CONFLICT (limit_key, window_start, holder) DO UPDATE
         SET granted = EXCLUDED.granted, held = EXCLUDED.held, wants = EXCLUDED.wants, expires_at = EXCLUDED.expires_at`,
      [
        ...params,
        String(granted > lease.held ? granted : lease.held),
        String(lease.held),
        String(wants),
        this.#stopping ? 0 : this.opts.ttlMs,
      ],
    );
  }

  #unreachable(err: unknown): void {
    const code = (err as { code?: unknown }).code;
    const sqlstate = typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) ? code : undefined;
    // The server answered with an error of the statement itself (not of the connection): say so
    // loudly, every time; the limit acts as when the database is away, the others go on.
    if (sqlstate && !/^(08|53|57P)/.test(sqlstate)) {
      this.logger.error({ err: (err as Error).message, sqlstate }, 'fleet leases: a lease statement failed');
      return;
    }
    // Calls meanwhile run on what is held instead of each waiting for a connection attempt.
    this.#downUntil = Date.now() + 1_000;
    if (this.#warned) return;
    this.#warned = true;
    this.logger.warn(
      { err: (err as Error).message },
      'fleet leases: database unreachable; limits run on the slices held, then per docs/fleet.md',
    );
  }

  #schedule(): void {
    if (this.#timer || this.#stopping) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      void this.sync().finally(() => {
        if (this.#leases.size > 0) this.#schedule();
      });
    }, this.opts.syncMs);
    this.#timer.unref();
  }

  /**
   * The background pass over the leases held: gives unused slices back to a sidecar that wants
   * room (and keeps to what calls need for a while), gives back slices left idle, checks which
   * ended calls the database shows, renews before the lease lapses, and forgets empty leases.
   */
  async sync(now = Date.now()): Promise<void> {
    while (this.#syncing) await this.#syncing;
    const pass = this.#pass(now);
    this.#syncing = pass;
    try {
      await pass;
    } finally {
      this.#syncing = undefined;
    }
  }

  async #pass(now: number): Promise<void> {
    try {
      // Slices with room this sidecar does not use (what its calls spent may have shrunk since it
      // last wrote): another sidecar waiting for room gets it back at once.
      const holding = [...this.#leases.values()].filter((l) => l.free > 0n && now < l.validUntil);
      const wanted = new Set<string>();
      if (holding.length > 0) {
        const rows = await this.db.query<{ limit_key: string; window_start: Date }>(
          `SELECT DISTINCT w.limit_key, w.window_start FROM fleet_leases w
             JOIN fleet_leases m ON m.limit_key = w.limit_key AND m.window_start = w.window_start
            WHERE m.holder = $1 AND w.holder <> $1 AND w.wants > 0 AND w.expires_at > now()`,
          [this.holder],
          { name: 'meter_fleet_wanted' },
        );
        for (const r of rows) wanted.add(`${r.limit_key}@${new Date(r.window_start).getTime()}`);
      }
      const work: Promise<void>[] = [];
      for (const [id, lease] of this.#leases) {
        lease.cool(now);
        if (wanted.has(id)) {
          lease.tightUntil = now + 5_000;
          work.push(this.#statement(lease, 0n));
        } else if (now - lease.lastTake >= this.opts.idleMs && (lease.granted > 0n || lease.held > 0n)) {
          // Idle: give the unused slice back; spent units are checked against the database.
          if (lease.free > 0n || lease.ended().length > 0 || lease.validUntil - now < this.opts.ttlMs / 2)
            work.push(this.#statement(lease, 0n));
        } else if (lease.granted > 0n && lease.validUntil - now < this.opts.ttlMs / 2) {
          work.push(this.#statement(lease, 0n));
        }
        // Forget an empty lease, unless a call is waiting on it (one holder, one lease object).
        const empty =
          lease.granted === 0n && lease.held === 0n && lease.entries.size === 0 && lease.buckets.length === 0;
        if (empty && lease.wanting === 0n && lease.waiting === 0n && lease.pending === 0) this.#leases.delete(id);
      }
      const results = await Promise.allSettled(work);
      for (const r of results) if (r.status === 'rejected') this.#unreachable(r.reason);
    } catch (err) {
      this.#unreachable(err);
    }
  }

  #stopping = false;

  /** Gives every slice back: what is spent stays counted for the grace period. */
  async stop(): Promise<void> {
    this.#stopping = true;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    await Promise.allSettled([...this.#leases.values()].map((l) => this.#statement(l, 0n)));
  }

  /** Leases held, for /metrics and tests. */
  leases(): Lease[] {
    return [...this.#leases.values()];
  }
}

interface Figures {
  used: string;
  others_granted: string;
  others_held: string;
  seen: string[];
}
