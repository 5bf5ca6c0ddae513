/**
 * One limit's window as the fleet shares it (docs/fleet.md). `written`: units stay spent until
 * the database shows the usage event that spent them (the monthly quota's calls, a budget's
 * spend): the database's own count takes over from there. `minute`: units are slots of a
 * per-minute limit, spent for 60 s from the call's admission and then free again, so a slice
 * of n admits at most n calls (or tokens) in any 60 s.
 */
export type LimitKind = 'written' | 'minute';

export interface LimitSpec {
  /** Names the limit in fleet_leases, e.g. `quota:<account id>`, `rpm:key:<key id>`. */
  key: string;
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

interface Held {
  units: bigint;
  /** `written`: the usage event's time once the call ended (then the database may show it). */
  time?: string;
  /** `minute`: when the slot is free again (admission + 60 s). */
  releaseAt?: number;
}

/** What one sidecar holds of one limit: its slice (`granted`) and what calls have spent of it. */
export class Lease {
  granted = 0n;
  held = 0n;
  readonly entries = new Map<string, Held>();
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

  /** Frees per-minute slots whose 60 s are over. Entries are in admission order. */
  cool(now: number): void {
    if (this.spec.kind !== 'minute') return;
    for (const [id, h] of this.entries) {
      if (h.releaseAt! > now) break;
      this.entries.delete(id);
      this.held -= h.units;
    }
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
    if (this.spec.kind === 'minute') h.releaseAt = now + MINUTE_MS;
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
    this.held += units - h.units;
    h.units = units;
    if (this.spec.kind === 'written') {
      if (units === 0n) this.release(id);
      else h.time = time;
    }
  }

  /** The call spent nothing (refused later, or never forwarded): its units come back. */
  release(id: string): void {
    const h = this.entries.get(id);
    if (!h) return;
    this.entries.delete(id);
    this.held -= h.units;
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

  /** Seconds until the oldest per-minute slot is free again (1 at least; 60 with none held). */
  resetSeconds(now: number): number {
    for (const h of this.entries.values()) return Math.max(1, Math.ceil((h.releaseAt! - now) / 1000));
    return 60;
  }

  /** The fleet's remaining units as this sidecar last saw them. */
  remaining(): bigint {
    const left = this.spec.amount - this.used - this.othersHeld - this.held;
    return left > 0n ? left : 0n;
  }
}
