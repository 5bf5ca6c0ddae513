/**
 * Every budget's window spend and alerts, kept cheap on the database. It reads what the pulse
 * (pulse/changes.ts: one statement a sidecar every METER_KEY_REFRESH_MS) says moved:
 * - definitions, only when the change counter moved; then every budget of a served account
 *   (and every shadow one, which the gate needs before an account's first call) is re-read;
 * - spend, only for the budgets of served accounts that had events written since the last
 *   pulse (by any sidecar), and of budgets whose window just turned;
 * - and every served account's budgets in a slow sweep (default 30 s: repricing, replays),
 *   skipped on an idle embedded store until a write or the next quarter hour (RereadSkip).
 * "Served" is what the daemon metered lately (pulse/served.ts); without it (tests), every
 * account. It fires every budget's levels, the account budget's included (one model, CONTRACT
 * §6), and keeps each budget's spend for /metrics and the gate.
 */
import { createHash } from 'node:crypto';
import type { Component } from '../component.js';
import type { Pulse } from '../pulse/changes.js';
import type { Logger } from '../log.js';
import { formatUnits, reached, toUnits } from '../money.js';
import { PeriodicTask, Serial } from '../periodic.js';
import { readWithSeen, RereadSkip } from '../store/snapshot.js';
import type { Db } from '../store/types.js';
import { BudgetBook } from './book.js';
import { fireBudgetLevel } from './budget-alerts.js';
import { loadAllDefinitions, type BudgetDef } from './definitions.js';
import type { SpendWindow } from './spend.js';
import { spendQuery } from './spend.js';
import { firedLevels } from './status.js';

export interface BudgetMonitorOptions {
  /** How often every served account's budgets are re-read whatever the pulses found. */
  sweepMs: number;
  /** The accounts this sidecar serves; without it, every account. */
  served?: () => string[];
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

const QUARTER_HOUR = 900_000;

/** Quarter-hour buckets are kept this long (the longest window, a quarter, plus slack). */
const QUARTER_HOUR_KEEP_DAYS = 100;

/** The spend statements are few texts (one per scope kind and window shape) read over and over:
 *  each is named after its text, so it is parsed and planned once per connection. */
const names = new Map<string, string>();
function statementName(sql: string): string {
  let name = names.get(sql);
  if (!name)
    names.set(sql, (name = `meter_budget_spend_${createHash('sha256').update(sql).digest('hex').slice(0, 12)}`));
  return name;
}

export class BudgetMonitor implements Component {
  readonly name = 'budgets';
  readonly book = new BudgetBook();
  readonly states = new Map<string, BudgetSpendState>();
  #lastTrim = 0;
  #ledger: BudgetLedger | undefined;
  #refired = new Set<string>();
  readonly #task: PeriodicTask;
  readonly #serial = new Serial();
  readonly #rereads = new RereadSkip();
  readonly #now: () => number;
  /** Per account: what this sidecar metered since its budgets were last read (units). */
  readonly #unread = new Map<string, bigint>();
  /** Told when a level fired (the alert deliverer sends at once). */
  onFired: (() => void) | undefined;

  constructor(
    private readonly db: Db,
    private readonly logger: Logger,
    private readonly opts: BudgetMonitorOptions,
  ) {
    this.#now = opts.now ?? Date.now;
    this.#task = new PeriodicTask(() => this.sweep(), {
      what: 'budgets: spend sweep',
      logger,
      pauseMs: opts.sweepMs,
    });
  }

  /** The gate's ledger, told after each read which of its costs the spend now shows. */
  attachLedger(ledger: BudgetLedger): void {
    this.#ledger = ledger;
  }

  /** The sweep after one pause. Definitions and a first read come before the daemon serves: in
   *  the daemon (`served` given) from the pulse's first beat, which starts before the proxy;
   *  standing alone, from a pulse of its own here. */
  async start(): Promise<void> {
    if (!this.opts.served) await this.pulse({ changed: true, dirty: new Set(), alertsDue: false });
    void this.#task.start('after-pause');
  }

  stop(): Promise<void> {
    return this.#task.stop();
  }

  /** The pulse's share: definitions if they changed, then what may have moved. */
  pulse(p: Pulse): Promise<void> {
    return this.#serial.run(async () => {
      const now = this.#now();
      if (p.changed) await this.#load();
      const served = p.changed ? this.#served() : undefined;
      for (const def of this.book.all()) {
        const state = this.states.get(def.id);
        // A new window starts from its own spend and no level fired, at once.
        const rolled = state !== undefined && (now >= state.window.end || now < state.window.start);
        const wanted = served
          ? served.has(def.accountId) || (def.action === 'shadow' && !state)
          : p.dirty.has(def.accountId);
        if (rolled || wanted) await this.evaluate(def, now);
      }
    });
  }

  /** This sidecar's costs per account since the last nudge, after the writer committed them: the
   *  budgets of an account whose spend as last read plus those costs (the whole account's, a
   *  bound for any scope) reach a level not fired yet are read again at once, so the alert leaves
   *  within a flush interval carrying the spend at the crossing. */
  nudge(costs: ReadonlyMap<string, bigint>): Promise<void> {
    const due = new Set<string>();
    for (const [accountId, units] of costs) {
      const unread = (this.#unread.get(accountId) ?? 0n) + units;
      this.#unread.set(accountId, unread);
      for (const def of this.book.of(accountId)) {
        const s = this.states.get(def.id);
        if (!s) due.add(accountId);
        else if (def.levels.some((l) => !s.fired.has(l) && reached(s.spendUnits + unread, def.amountUnits, l)))
          due.add(accountId);
      }
    }
    return due.size === 0 ? Promise.resolve() : this.pulse({ changed: false, dirty: due, alertsDue: false });
  }

  /** Definitions and every budget read now, whatever the pulse says; the levels this fired. */
  refresh(): Promise<{ budget: string; account: string; level: number }[]> {
    return this.#serial.run(async () => {
      const now = this.#now();
      await this.#load();
      const fired: { budget: string; account: string; level: number }[] = [];
      for (const def of this.book.all())
        for (const level of await this.evaluate(def, now)) fired.push({ budget: def.id, account: def.account, level });
      return fired;
    });
  }

  /** Every served account's budgets re-read; buckets past the longest window trimmed hourly. */
  sweep(): Promise<void> {
    return this.#serial.run(async () => {
      const now = this.#now();
      const served = this.#served();
      // An idle embedded store is not read again until a write, or the next quarter hour (the
      // first instant of every window of every zone is one).
      await this.#rereads.run(this.db, String(Math.floor(now / QUARTER_HOUR)), async () => {
        if (!this.opts.served) await this.#load(); // standing alone, no pulse tells of changes
        for (const def of this.book.all()) if (served.has(def.accountId)) await this.evaluate(def, now);
      });
      if (now - this.#lastTrim > 3_600_000) {
        this.#lastTrim = now;
        await this.trim();
      }
    });
  }

  /** The definitions read again. A changed budget may have had levels re-armed: the fired
   *  levels of every budget are read again at its next evaluation. */
  async #load(): Promise<void> {
    this.book.replace(await loadAllDefinitions(this.db));
    for (const id of this.states.keys()) if (!this.book.get(id)) this.states.delete(id);
    this.#refired = new Set(this.states.keys());
  }

  /** The served accounts, or every budget's account where the monitor stands alone (tests). */
  #served(): Set<string> {
    return new Set(this.opts.served ? this.opts.served() : this.book.all().map((d) => d.accountId));
  }

  /** Re-reads one budget's spend and fires the levels it has reached, lowest first; returns
   *  the levels this call fired (not those another sidecar fired first). */
  private async evaluate(def: BudgetDef, now: number): Promise<number[]> {
    const window = this.book.windowOf(def.id, now)!;
    let state = this.states.get(def.id);
    if (!state || state.window.start !== window.start || this.#refired.has(def.id)) {
      this.#refired.delete(def.id);
      const fired = new Set(await firedLevels(this.db, def, window));
      // The spend read last stays in force until this read's is installed (below).
      state = { window, spendUnits: state?.window.start === window.start ? state.spendUnits : 0n, fired };
    }
    this.#unread.delete(def.accountId);
    const { sql, params } = spendQuery(def.accountId, def.scope, window);
    const { rows, seen } = await readWithSeen<{ spend: string }>(
      this.db,
      sql,
      params,
      () => (this.#ledger ? this.#ledger.unseenEvents(def.id) : []),
      statementName(sql),
    );
    const spend = formatUnits(toUnits(rows[0]?.spend ?? '0'));
    // One synchronous step: the new spend and the ledger's costs it holds change together.
    state.spendUnits = toUnits(spend);
    this.states.set(def.id, state);
    this.#ledger?.seen(def.id, seen);
    const fired: number[] = [];
    for (const level of def.levels) {
      if (state.fired.has(level) || !reached(state.spendUnits, def.amountUnits, level)) continue;
      const r = await fireBudgetLevel(this.db, def, window, level, spend, new Date(now));
      state.fired.add(level);
      if (r.fired) {
        fired.push(level);
        this.onFired?.();
        this.logger.info(
          {
            budget: def.id,
            account: def.account,
            window_start: new Date(window.start).toISOString(),
            level,
            channels: r.queued,
            event_id: r.eventId,
          },
          'budget level reached; alert queued',
        );
      }
    }
    return fired;
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
