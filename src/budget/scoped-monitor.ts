/**
 * Every budget's window spend and alerts, kept cheap on the database:
 * - definitions are re-read only when meter_changes.version moves (sql/130; one row, polled
 *   every second with the rest of the poll), so a change reaches every sidecar within ~1 s;
 * - spend is re-read only for the budgets of accounts that had events written since the last
 *   poll (by any sidecar: one index probe per budgeted account on usage_events' (account_id,
 *   recorded_at)), and for every budget in a slow sweep (default 30 s: window changes, replays).
 * The account budget's alerts stay with monitor.ts (alert_levels_fired); this monitor fires the
 * other budgets' levels and keeps each budget's spend for /metrics and the admission gate.
 */
import type { Component } from '../component.js';
import type { Logger } from '../log.js';
import { formatUnits, reached, toUnits } from '../money.js';
import { PeriodicTask } from '../periodic.js';
import { readWithSeen } from '../store/snapshot.js';
import type { Db } from '../store/types.js';
import { BudgetBook } from './book.js';
import { fireBudgetLevel } from './budget-alerts.js';
import { loadAllDefinitions, type BudgetDef } from './definitions.js';
import type { SpendWindow } from './spend.js';
import { spendQuery } from './spend.js';
import { firedLevels } from './status.js';

export interface ScopedMonitorOptions {
  /** How often meter_changes and recent writes are polled (≤ 1 s). */
  pollMs: number;
  /** How often every budget is re-read whatever the poll found. */
  sweepMs: number;
  now?: () => number;
}

/** A budget's last evaluation. */
export interface BudgetSpendState {
  window: SpendWindow;
  spendUnits: bigint;
  /** Levels known fired in this window (read once per window, then added to as they fire). */
  fired: Set<number>;
}

/** Costs the admission gate counts itself until a spend read shows them (gate.ts). */
export interface BudgetLedger {
  unseenEvents(budgetId: string): { id: string; time: string }[];
  seen(budgetId: string, ids: Iterable<string>): void;
}

/** Seconds of overlap between polls: a row's recorded_at is taken before its commit. */
const RECENT_MARGIN_S = 5;
/** Quarter-hour buckets are kept this long (the longest window, a quarter, plus slack). */
const QUARTER_HOUR_KEEP_DAYS = 100;

export class ScopedBudgetMonitor implements Component {
  readonly name = 'budgets';
  readonly book = new BudgetBook();
  readonly states = new Map<string, BudgetSpendState>();
  #version: string | undefined;
  #since: string | undefined;
  #lastSweep = 0;
  #lastTrim = 0;
  #ledger: BudgetLedger | undefined;
  #writes: number | undefined;
  #refired = new Set<string>();
  readonly #task: PeriodicTask;
  readonly #now: () => number;

  constructor(
    private readonly db: Db,
    private readonly logger: Logger,
    private readonly opts: ScopedMonitorOptions,
  ) {
    this.#now = opts.now ?? Date.now;
    this.#task = new PeriodicTask(() => this.poll(), {
      what: 'budgets: spend poll',
      logger,
      pauseMs: opts.pollMs,
    });
  }

  /** The gate's ledger, told after each read which of its costs the spend now shows. */
  attachLedger(ledger: BudgetLedger): void {
    this.#ledger = ledger;
  }

  async start(): Promise<void> {
    await this.#task.start('now');
  }

  stop(): Promise<void> {
    return this.#task.stop();
  }

  /** One poll: reload definitions if they changed, then evaluate what may have moved. */
  async poll(): Promise<void> {
    // The embedded store counts its writes (this process is its only client): while that count,
    // the windows and the sweep stand still, there is nothing new to read.
    const writes = this.db.writes?.();
    const now0 = this.#now();
    if (
      writes !== undefined &&
      writes === this.#writes &&
      now0 - this.#lastSweep < this.opts.sweepMs &&
      [...this.states.values()].every((s) => now0 >= s.window.start && now0 < s.window.end)
    )
      return;
    const accounts = [...new Set(this.book.all().map((d) => d.accountId))];
    const [row] = await this.db.query<{ version: string; now: string; dirty: string[] }>(
      `SELECT (SELECT version::text FROM meter_changes WHERE id = 1) AS version,
              (now() - make_interval(secs => ${RECENT_MARGIN_S}))::text AS now,
              coalesce((SELECT array_agg(a.id::text) FROM unnest($1::uuid[]) AS a(id)
                         WHERE $2::timestamptz IS NOT NULL AND EXISTS (
                           SELECT 1 FROM usage_events e WHERE e.account_id = a.id AND e.recorded_at > $2::timestamptz
                              AND e.time > $2::timestamptz - interval '1 day')), '{}') AS dirty`,
      [accounts, this.#since ?? null],
      { name: 'meter_budget_poll' },
    );
    const now = this.#now();
    let all = now - this.#lastSweep >= this.opts.sweepMs;
    if (row!.version !== this.#version) {
      this.book.replace(await loadAllDefinitions(this.db));
      this.#version = row!.version;
      for (const id of this.states.keys()) if (!this.book.get(id)) this.states.delete(id);
      // A changed budget may have had levels re-armed: its fired levels are read again.
      this.#refired = new Set(this.states.keys());
      all = true;
    }
    this.#since = row!.now;
    const dirty = new Set(row!.dirty);
    for (const def of this.book.all()) {
      const state = this.states.get(def.id);
      // A new window starts from its own spend and no level fired, at once.
      const rolled = !state || now >= state.window.end || now < state.window.start;
      if (all || rolled || dirty.has(def.accountId)) await this.evaluate(def, now);
    }
    if (all) this.#lastSweep = now;
    if (now - this.#lastTrim > 3_600_000) {
      this.#lastTrim = now;
      await this.trim();
    }
    this.#writes = writes;
  }

  /** Re-reads one budget's spend and fires the levels it has reached, lowest first. */
  async evaluate(def: BudgetDef, now: number): Promise<BudgetSpendState> {
    const window = this.book.windowOf(def.id, now)!;
    let state = this.states.get(def.id);
    if (!state || state.window.start !== window.start || this.#refired.has(def.id)) {
      this.#refired.delete(def.id);
      const fired = new Set(await firedLevels(this.db, def, window));
      // The spend read last stays in force until this read's is installed (below).
      state = { window, spendUnits: state?.window.start === window.start ? state.spendUnits : 0n, fired };
    }
    const { sql, params } = spendQuery(def.accountId, def.scope, window);
    const { rows, seen } = await readWithSeen<{ spend: string }>(this.db, sql, params, () =>
      this.#ledger ? this.#ledger.unseenEvents(def.id) : [],
    );
    const spend = formatUnits(toUnits(rows[0]?.spend ?? '0'));
    // One synchronous step: the new spend and the ledger's costs it holds change together.
    state.spendUnits = toUnits(spend);
    this.states.set(def.id, state);
    this.#ledger?.seen(def.id, seen);
    if (def.accountBudget) return state; // its levels: monitor.ts
    for (const level of def.levels) {
      if (state.fired.has(level) || !reached(state.spendUnits, def.amountUnits, level)) continue;
      const r = await fireBudgetLevel(this.db, def, window, level, spend, new Date(now));
      state.fired.add(level);
      if (r.fired) {
        this.logger.info(
          {
            budget: def.id,
            window_start: new Date(window.start).toISOString(),
            level,
            channels: r.queued,
            event_id: r.eventId,
          },
          'budget level reached; alert queued',
        );
      }
    }
    return state;
  }

  /** Spend of a budget as last read (units), undefined before its first evaluation. */
  spendOf(id: string, now: number): bigint | undefined {
    const s = this.states.get(id);
    return s && now >= s.window.start && now < s.window.end ? s.spendUnits : s ? 0n : undefined;
  }

  /** Plain PostgreSQL and the embedded store: buckets past the longest window go. */
  private async trim(): Promise<void> {
    if (this.db.kind === 'timescale') return;
    for (const table of ['usage_quarter_hour', 'usage_tag_quarter_hour']) {
      await this.db.query(`DELETE FROM ${table} WHERE bucket < now() - interval '${QUARTER_HOUR_KEEP_DAYS} days'`);
    }
  }
}
