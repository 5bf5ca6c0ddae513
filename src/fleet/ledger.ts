import type { Logger } from '../log.js';
import { PeriodicTask } from '../periodic.js';
import type { Db } from '../store/types.js';
import { Lease, leaseId, type LimitSpec } from './lease.js';
import { wantedLeases } from './lease-sql.js';
import { LeaseStatements, type LedgerOptions } from './statements.js';

export type { LedgerOptions } from './statements.js';

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

/**
 * This sidecar's share of every fleet limit it serves (docs/fleet.md). Calls are admitted
 * against leased slices in memory; a slice running low is topped up in the background by one
 * short transaction under the limit's advisory lock, which grants only what the database's
 * count, the other sidecars' slices and this sidecar's own spending leave. Only when a slice
 * cannot cover a call does the call wait: for one statement, or, when other sidecars hold
 * unused slices, until they give them back (at their next sync) or the wait bound passes.
 * The sync pass runs every `syncMs` from the first call admitted until stop().
 */
export class FleetLedger {
  readonly #leases = new Map<string, Lease>();
  readonly #calls = new Map<string, Lease[]>();
  readonly #statements: LeaseStatements;
  readonly #loop: PeriodicTask;
  #looping = false;
  /** The pass under way: a second one waits for it (one pass at a time). */
  #syncing: Promise<void> | undefined;
  /** For /metrics: lease statements run and failed, calls that waited for the database. */
  readonly stats = { statements: 0, failures: 0, waits: 0 };

  constructor(
    private readonly db: Db,
    logger: Pick<Logger, 'warn' | 'info' | 'error'>,
    readonly opts: LedgerOptions = DEFAULT_LEDGER,
  ) {
    this.#statements = new LeaseStatements(db, logger, opts, this.stats);
    // The pass reports its own failures (#pass): the statements' outage state is shared with
    // the calls that wait for one.
    this.#loop = new PeriodicTask(() => this.sync(), { what: 'fleet leases: sync pass', logger, pauseMs: opts.syncMs });
  }

  /** This sidecar's name in fleet_leases. */
  get holder(): string {
    return this.#statements.holder;
  }

  /** How long a call may wait for room at most: one sync of the other sidecars, and the
   *  statements on either side of it. */
  get waitMs(): number {
    return 4 * this.opts.syncMs + 500;
  }

  lease(spec: LimitSpec): Lease {
    const id = leaseId(spec.key, spec.windowStart);
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
        void this.#statements.run(lease, 0n).catch(() => {});
    }
    this.#calls.set(callId, leases);
    if (!this.#looping && !this.#statements.stopping) {
      this.#looping = true;
      void this.#loop.start('after-pause');
    }
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
          if (this.#statements.down) throw new Error('database unreachable (retried shortly)');
          await this.#statements.run(lease, units, overdraw);
        } catch (err) {
          this.#statements.unreachable(err);
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
      if (lease.waiting === 0n && lease.wanting > 0n) void this.#statements.run(lease, 0n).catch(() => {});
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
      const wanted = holding.length > 0 ? await wantedLeases(this.db, this.holder) : new Set<string>();
      const work: Promise<void>[] = [];
      for (const [id, lease] of this.#leases) {
        lease.cool(now);
        if (wanted.has(id)) {
          lease.tightUntil = now + 5_000;
          work.push(this.#statements.run(lease, 0n));
        } else if (now - lease.lastTake >= this.opts.idleMs && (lease.granted > 0n || lease.held > 0n)) {
          // Idle: give the unused slice back; spent units are checked against the database.
          if (lease.free > 0n || lease.ended().length > 0 || lease.validUntil - now < this.opts.ttlMs / 2)
            work.push(this.#statements.run(lease, 0n));
        } else if (lease.granted > 0n && lease.validUntil - now < this.opts.ttlMs / 2) {
          work.push(this.#statements.run(lease, 0n));
        }
        // Forget an empty lease, unless a call is waiting on it (one holder, one lease object).
        const empty =
          lease.granted === 0n && lease.held === 0n && lease.entries.size === 0 && lease.buckets.length === 0;
        if (empty && lease.wanting === 0n && lease.waiting === 0n && lease.pending === 0) this.#leases.delete(id);
      }
      const results = await Promise.allSettled(work);
      for (const r of results) if (r.status === 'rejected') this.#statements.unreachable(r.reason);
    } catch (err) {
      this.#statements.unreachable(err);
    }
  }

  /** Gives every slice back: what is spent stays counted for the grace period. */
  async stop(): Promise<void> {
    this.#statements.stopping = true;
    await this.#loop.stop();
    await Promise.allSettled([...this.#leases.values()].map((l) => this.#statements.run(l, 0n)));
  }

  /** Leases held, for /metrics and tests. */
  leases(): Lease[] {
    return [...this.#leases.values()];
  }
}
