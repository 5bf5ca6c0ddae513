import type { FleetLimit } from './limit-key.js';

/**
 * One limit's window as the fleet shares it (docs/fleet.md). `written`: units stay spent until
 * the database shows the usage event that spent them (the monthly quota's calls, a budget's
 * spend): the database's own count takes over from there. `minute`: units are slots of a
 * per-minute limit, spent for 60 s from the call's admission and then free again, so a slice
 * of n admits at most n calls (or tokens) in any 60 s.
 */
export type LimitKind = 'written' | 'minute';

export interface LimitSpec {
  /** Names the limit in fleet_leases (`limitKey`, ./limit-key.ts). */
  key: string;
  /** What the limit is, for its refusal's words and the units a usage event settles (the
   *  ledger itself needs only the key; a spec without it settles at what the call reserved). */
  what?: FleetLimit;
  /** The window's start, ms since the epoch (0 for per-minute limits: no calendar window). */
  windowStart: number;
  kind: LimitKind;
  /** The limit, in its units (calls, tokens, or 1e-8 USD). */
  amount: bigint;
  /** `written` limits: one row, one column `used` (an integer as text): what the database
   *  counts of the window already, read in the same snapshot as the lease is granted. */
  used?: { sql: string; params: unknown[] };
  /** While the database cannot be reached and this sidecar's lease has lapsed: `open` admits
   *  as though this sidecar were alone (the last figures it read), `closed` refuses. */
  offline: 'open' | 'closed';
}

export const MINUTE_MS = 60_000;

/** One lease per limit and window (a limit's key names it in every window). */
export const leaseId = (key: string, windowStart: number): string => `${key}@${windowStart}`;

interface Held {
  units: bigint;
  /** `written`: the usage event's time once the call ended (then the database may show it). */
  time?: string;
  /** `minute`: the tick (ms since the epoch ÷ TICK_MS) its slot was taken in. */
  tick?: number;
}

/** `minute` limits: what was taken in one tick, held until a minute after that tick ends. */
interface Bucket {
  tick: number;
  units: bigint;
}

/** Per-minute slots are kept per tenth of a second: a slot is free again 60 to 60.1 s after
 *  its call was admitted, never sooner. */
const TICK_MS = 100;

/** What one sidecar holds of one limit: its slice (`granted`) and what calls have spent of it. */
export class Lease {
  granted = 0n;
  held = 0n;
  /** `written`: every call whose units the database does not count yet. `minute`: the calls in
   *  flight only (what they took may still change); the slots themselves are in `buckets`. */
  readonly entries = new Map<string, Held>();
  /** `minute`: slots taken per tick, oldest first (at most 601). */
  readonly buckets: Bucket[] = [];
  /** Local clock (ms): the slice may be used until then (the database's expiry comes later). */
  validUntil = 0;
  /** The fleet as of the last lease statement: what the database counted, and what other
   *  sidecars held (spent) and were granted. */
  used = 0n;
  othersHeld = 0n;
  othersGranted = 0n;
  /** Serialises this lease's statements. */
  busy: Promise<unknown> = Promise.resolve();
  /** Units taken recently, to size the next slice; when the lease was last used. */
  recent = 0n;
  lastTake = 0;
  /** Until then the slice is kept to what calls need: a sidecar asked the fleet for room. */
  tightUntil = 0;
  /** This sidecar asked the fleet to give back unused slices. */
  wanting = 0n;
  /** Statements queued or running, and the units of the calls waiting for one. */
  pending = 0;
  waiting = 0n;
  /** The database did not answer the last statement: past the slice, the last figures stand in
   *  (open limits). */
  offline = false;

  constructor(public spec: LimitSpec) {}

  get free(): bigint {
    return this.granted - this.held;
  }

  /** Frees per-minute slots whose minute is over: a slot taken in a tick is free a minute after
   *  the tick ends, so no 60 s ever see more than what was granted. */
  cool(now: number): void {
    const b = this.buckets;
    while (b.length > 0 && (b[0]!.tick + 1) * TICK_MS + MINUTE_MS <= now) this.held -= b.shift()!.units;
  }

  /** Units this sidecar may spend now without asking the database. */
  available(now: number): bigint {
    this.cool(now);
    const slice = now < this.validUntil ? this.free : 0n;
    if (this.offline && this.spec.offline === 'open') {
      // As though alone: the limit less what the database last counted and this sidecar holds.
      const alone = this.spec.amount - this.used - this.held;
      return alone > slice ? alone : slice;
    }
    return slice;
  }

  take(id: string, units: bigint, now: number): void {
    const h: Held = { units };
    if (this.spec.kind === 'minute') {
      const tick = Math.floor(now / TICK_MS);
      const last = this.buckets[this.buckets.length - 1];
      if (last?.tick === tick) last.units += units;
      else this.buckets.push({ tick, units });
      h.tick = tick;
    }
    this.entries.set(id, h);
    this.held += units;
    this.recent += units;
    this.lastTake = now;
  }

  /** The call ended: its real units replace its reservation (`time`: its usage event's). */
  settle(id: string, real: bigint | undefined, time: string): void {
    const h = this.entries.get(id);
    if (!h) return;
    const units = real ?? h.units;
    if (this.spec.kind === 'minute') {
      // Its slot stays taken for its minute; only its count changes (tokens: the real use).
      this.entries.delete(id);
      this.#adjust(h, units - h.units);
      return;
    }
    this.held += units - h.units;
    h.units = units;
    if (units === 0n) this.release(id);
    else h.time = time;
  }

  /** The call spent nothing (refused later, or never forwarded): its units come back. */
  release(id: string): void {
    const h = this.entries.get(id);
    if (!h) return;
    this.entries.delete(id);
    if (this.spec.kind === 'minute') this.#adjust(h, -h.units);
    else this.held -= h.units;
  }

  /** Changes a per-minute call's units in its tick's bucket (none once that has cooled). */
  #adjust(h: Held, delta: bigint): void {
    for (let i = this.buckets.length - 1; i >= 0; i--) {
      const b = this.buckets[i]!;
      if (b.tick < h.tick!) return;
      if (b.tick === h.tick) {
        b.units += delta;
        this.held += delta;
        return;
      }
    }
  }

  /** `written` entries whose events the database may show now. */
  ended(): { id: string; time: string }[] {
    const out: { id: string; time: string }[] = [];
    if (this.spec.kind === 'written') for (const [id, h] of this.entries) if (h.time) out.push({ id, time: h.time });
    return out;
  }

  /** The database shows these events: their units are in its count now, not in this lease. */
  seen(ids: Iterable<string>): void {
    for (const id of ids) this.release(id);
  }

  /** Seconds until the oldest per-minute slot is free again (1 to 60; 60 with none held). */
  resetSeconds(now: number): number {
    const first = this.buckets[0];
    if (!first) return 60;
    return Math.min(60, Math.max(1, Math.ceil(((first.tick + 1) * TICK_MS + MINUTE_MS - now) / 1000)));
  }

  /** The fleet's remaining units as this sidecar last saw them. */
  remaining(): bigint {
    const left = this.spec.amount - this.used - this.othersHeld - this.held;
    return left > 0n ? left : 0n;
  }
}
