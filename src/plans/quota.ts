import type { Queryable } from '../store/types.js';

/** First instant of the UTC month containing t, and of the next one. */
export function monthBounds(t: number): { start: number; next: number } {
  const d = new Date(t);
  return {
    start: Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1),
    next: Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1),
  };
}

/**
 * Month-to-date proxied calls per account, fleet-wide: the count every sidecar has written
 * (usage_daily, re-read every flush interval) plus the calls this sidecar admitted since that
 * read began. Calls of other sidecars not yet written are unseen, so a fleet can overshoot a
 * quota by what it admits in about one flush interval plus one refresh (README).
 */
export class QuotaTracker {
  #month = monthBounds(Date.now()).start;
  #written = new Map<string, number>();
  #local = new Map<string, number>();

  /** Re-reads the fleet's counts. Calls admitted while the query runs stay counted locally. */
  async refresh(db: Queryable, now = Date.now()): Promise<void> {
    const { start } = monthBounds(now);
    const localDuring = new Map<string, number>();
    const before = this.#local;
    this.#local = localDuring; // admissions from here on are not in what the query may see
    try {
      const day = new Date(start).toISOString().slice(0, 10);
      const rows = await db.query<{ account_id: string; n: string }>(
        // Only accounts whose plan has a quota: the others need no count.
        `SELECT d.account_id, sum(d.requests) AS n FROM usage_daily d
           JOIN accounts a ON a.id = d.account_id JOIN plans p ON p.name = a.plan
          WHERE d.day >= $1 AND p.monthly_call_quota IS NOT NULL GROUP BY d.account_id`,
        [day],
      );
      this.#written = new Map(rows.map((r) => [r.account_id, Number(r.n)]));
      this.#month = start;
    } catch (err) {
      // Keep the old picture, and every local admission in it.
      for (const [k, v] of before) localDuring.set(k, (localDuring.get(k) ?? 0) + v);
      throw err;
    }
  }

  used(accountId: string, now = Date.now()): number {
    const local = this.#local.get(accountId) ?? 0;
    return monthBounds(now).start === this.#month ? (this.#written.get(accountId) ?? 0) + local : local;
  }

  /** true while the month's quota has room for one more call. */
  fits(accountId: string, quota: number | null, now = Date.now()): boolean {
    return quota === null || this.used(accountId, now) < quota;
  }

  /** Counts a call against the quota when it fits; false when the month's quota is used up. */
  take(accountId: string, quota: number | null, now = Date.now()): boolean {
    if (!this.fits(accountId, quota, now)) return false;
    this.#local.set(accountId, (this.#local.get(accountId) ?? 0) + 1);
    return true;
  }
}
