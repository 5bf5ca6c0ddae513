import { randomUUID } from 'node:crypto';
import type { Logger } from '../log.js';
import type { Db } from '../store/types.js';
import type { Lease } from './lease.js';
import { lockLimit, readFigures, writeLease } from './lease-sql.js';

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

/** The local end of a lease comes this much before the database's, whatever the round trip. */
const MARGIN_MS = 2_000;

/**
 * This sidecar's lease statements (docs/fleet.md): one short transaction per statement under
 * the limit's advisory lock, one statement per lease at a time, each sizing the slice this
 * sidecar holds from what the database counts and the other sidecars hold. It also keeps how
 * the database answers: while it is unreachable, calls run on the slices held instead of each
 * waiting for a connection attempt.
 */
export class LeaseStatements {
  readonly holder = randomUUID();
  /** Set at stop: every slice is given back and the rows lapse at once. */
  stopping = false;
  #warned = false;
  #downUntil = 0;

  constructor(
    private readonly db: Db,
    private readonly logger: Pick<Logger, 'warn' | 'error'>,
    private readonly opts: LedgerOptions,
    /** For /metrics: statements run and failed. */
    private readonly stats: { statements: number; failures: number },
  ) {}

  /** The database failed lately: a call should not wait for another attempt yet. */
  get down(): boolean {
    return Date.now() < this.#downUntil;
  }

  /** One lease statement, after any running one for the same lease. `need`: units a waiting
   *  call needs; 0 to renew, top up or give back. */
  run(lease: Lease, need: bigint, overdraw = false): Promise<void> {
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
   * it shows), what the other sidecars hold, then this sidecar's new slice. `overdraw`: the
   * call may take its units whole while any of the limit is left.
   */
  async #grant(lease: Lease, need: bigint, total: bigint, overdraw: boolean): Promise<void> {
    const { spec } = lease;
    const started = Date.now();
    const ended = lease.ended();
    const window = new Date(spec.windowStart).toISOString();
    await this.db.transaction(async (tx) => {
      await lockLimit(tx, spec.key, window);
      const row = await readFigures(tx, spec, window, this.holder, this.opts.ttlMs, ended);
      // One synchronous step: the figures and the events they hold change together.
      lease.seen(row.seen);
      lease.cool(Date.now());
      lease.used = BigInt(row.used);
      lease.othersGranted = BigInt(row.others_granted);
      lease.othersHeld = BigInt(row.others_held);
      const granted = this.#slice(lease, need, total, started, overdraw);
      const wants = granted - lease.held < need && lease.othersGranted > 0n ? total : 0n;
      // A smaller slice applies at once; a larger one once it is committed.
      const before = lease.granted;
      if (granted < before) lease.granted = granted;
      const empty = granted === 0n && lease.held === 0n && wants === 0n;
      await writeLease(
        tx,
        spec.key,
        window,
        this.holder,
        empty
          ? undefined
          : {
              granted: granted > lease.held ? granted : lease.held,
              held: lease.held,
              wants,
              ttlMs: this.stopping ? 0 : this.opts.ttlMs,
            },
      );
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
    if (idle || this.stopping) free = 0n;
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

  /** A statement failed: a statement's own error is logged every time; an unreachable
   *  database once per outage, and calls run on the slices held for a second. */
  unreachable(err: unknown): void {
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
}
