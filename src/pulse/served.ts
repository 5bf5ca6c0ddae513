/**
 * The accounts a sidecar serves: those it metered a call for within `keepMs`. The pulse probes
 * only these for new events, and the budget monitors re-read only their budgets, so a sidecar's
 * reads follow its own traffic, not the fleet's number of accounts.
 */
export class ServedAccounts {
  readonly #lastSeen = new Map<string, number>();

  constructor(
    private readonly keepMs = 15 * 60_000,
    private readonly now: () => number = Date.now,
  ) {}

  /** Once per metered call: one Map.set. */
  touch(accountId: string): void {
    this.#lastSeen.set(accountId, this.now());
  }

  /** The accounts served within keepMs (older ones are forgotten here). */
  list(): string[] {
    const cutoff = this.now() - this.keepMs;
    const out: string[] = [];
    for (const [id, at] of this.#lastSeen) {
      if (at < cutoff) this.#lastSeen.delete(id);
      else out.push(id);
    }
    return out;
  }
}
