import { windowBounds } from '../calendar.js';
import { readWithSeen } from '../store/snapshot.js';
import type { Db } from '../store/types.js';

/** A call's usage event, by which a re-read recognises it: its id and time. */
export interface CallRef {
  id: string;
  time: Date;
}

/**
 * Month-to-date proxied calls per account, fleet-wide: the count every sidecar has written
 * (usage_daily, re-read every flush interval) plus the calls this sidecar admitted that the
 * re-read does not show yet. Each admitted call is counted exactly once: locally from admission
 * until a re-read whose snapshot holds its event (asked in that same snapshot), then only in the
 * re-read count. Calls of other sidecars not yet written are unseen, so a fleet can overshoot a
 * quota by what the other sidecars admit in about one flush interval plus one re-read (README).
 */
export class QuotaTracker {
  #month = windowBounds('month', Date.now()).start;
  #written = new Map<string, number>();
  /** Admitted here, not shown by a re-read yet: by event id. */
  #unseen = new Map<string, { id: string; time: string; accountId: string }>();
  /** Their count per account, plus calls admitted without an event id since the last re-read began. */
  #local = new Map<string, number>();
  #anonymous = new Map<string, number>();

  /** Re-reads the fleet's counts, and which of this sidecar's admitted calls they hold. */
  async refresh(db: Db, now = Date.now()): Promise<void> {
    const { start } = windowBounds('month', now);
    const anonymousBefore = this.#anonymous;
    this.#anonymous = new Map(); // id-less admissions from here on are not in what the query may see
    try {
      const day = new Date(start).toISOString().slice(0, 10);
      const { rows, seen } = await readWithSeen<{ account_id: string; n: string }>(
        db,
        // Only accounts whose plan has a quota: the others need no count.
        `SELECT d.account_id, sum(d.requests) AS n FROM usage_daily d
           JOIN accounts a ON a.id = d.account_id JOIN plans p ON p.name = a.plan
          WHERE d.day >= $1 AND p.monthly_call_quota IS NOT NULL GROUP BY d.account_id`,
        [day],
        () => [...this.#unseen.values()],
        'meter_quota_counts',
      );
      // One synchronous step: the new counts and the local calls they hold change together.
      this.#written = new Map(rows.map((r) => [r.account_id, Number(r.n)]));
      this.#month = start;
      for (const [accountId, n] of anonymousBefore) this.#add(accountId, -n);
      for (const id of seen) this.#forget(id);
      const month = new Date(start).toISOString().slice(0, 7);
      for (const [id, c] of this.#unseen) if (c.time.slice(0, 7) < month) this.#forget(id);
    } catch (err) {
      // Keep the old picture, and every local admission in it.
      for (const [k, v] of anonymousBefore) this.#anonymous.set(k, (this.#anonymous.get(k) ?? 0) + v);
      throw err;
    }
  }

  used(accountId: string, now = Date.now()): number {
    const local = this.#local.get(accountId) ?? 0;
    return windowBounds('month', now).start === this.#month ? (this.#written.get(accountId) ?? 0) + local : local;
  }

  /** true while the month's quota has room for one more call. */
  fits(accountId: string, quota: number | null, now = Date.now()): boolean {
    return quota === null || this.used(accountId, now) < quota;
  }

  /** Counts a call against the quota when it fits; false when the month's quota is used up.
   *  `call` names its usage event, so a re-read that shows it stops counting it here. */
  take(accountId: string, quota: number | null, now = Date.now(), call?: CallRef): boolean {
    if (!this.fits(accountId, quota, now)) return false;
    if (quota === null) return true; // nothing to count
    if (call) this.#unseen.set(call.id, { id: call.id, time: call.time.toISOString(), accountId });
    else this.#anonymous.set(accountId, (this.#anonymous.get(accountId) ?? 0) + 1);
    this.#add(accountId, 1);
    return true;
  }

  #forget(id: string): void {
    const c = this.#unseen.get(id);
    if (!c) return;
    this.#unseen.delete(id);
    this.#add(c.accountId, -1);
  }

  #add(accountId: string, n: number): void {
    const v = (this.#local.get(accountId) ?? 0) + n;
    if (v === 0) this.#local.delete(accountId);
    else this.#local.set(accountId, v);
  }
}
