import type { Logger } from '../log.js';
import type { Component } from '../component.js';
import { PeriodicTask } from '../periodic.js';
import { readWithSeen, RereadSkip } from '../store/snapshot.js';
import type { Db } from '../store/types.js';
import { composeAlert } from './compose-alert.js';
import { formatUnits, reached, toUnits } from '../money.js';
import { currentMonth, isoInZone } from '../calendar.js';
import { accountBudgetId } from './definitions.js';
import { budgetStatesQuery, fireLevel, LEVELS, type BudgetRow } from './queries.js';

/** What the daemon knows about one budgeted account, as of the last refresh. */
export interface BudgetSnapshot {
  accountId: string;
  account: string;
  /** "YYYY-MM" (UTC). */
  month: string;
  /** Monthly budget in USD, decimal text, and in units of 1e-8 USD. */
  budget: string;
  budgetUnits: bigint;
  /** true when the budget asks for a hard cap and the account's plan includes one. */
  hardCap: boolean;
  /** Month-to-date spend of the whole fleet (every sidecar's writes), decimal text and units. */
  spend: string;
  spendUnits: bigint;
  levelsFired: number[];
  refreshedAt: Date;
}

/**
 * Costs a sidecar counts itself until the re-read spend shows them (the hard cap's ledger). The
 * monitor asks, in the snapshot the spend was read from, which of them that snapshot holds.
 */
export interface SpendLedger {
  /** Events whose cost is counted locally (id and event time: the key of usage_events). */
  unseenEvents(): { id: string; time: string }[];
  /** false while the ledger holds nothing: no call in flight, no cost unseen. */
  active(): boolean;
  /** Called in the same synchronous step as the new spend is installed. */
  seen(ids: Iterable<string>, month: string): void;
}

export interface BudgetMonitorOptions {
  /** How often spend is re-read; the daemon uses config.flushIntervalMs. */
  intervalMs: number;
  /** Clock (tests move it across a month boundary). */
  now?: () => Date;
}

/**
 * Re-reads every budgeted account's month-to-date spend from usage_daily each interval, keeps it
 * in memory for the hard cap, and fires the 50/80/100% levels it finds crossed, in order.
 */
export class BudgetMonitor implements Component {
  readonly name = 'budget';
  private states = new Map<string, BudgetSnapshot>();
  private readonly task: PeriodicTask;
  private readonly now: () => Date;
  private ledger: SpendLedger | undefined;
  private readonly rereads = new RereadSkip();

  constructor(
    private readonly db: Db,
    private readonly logger: Logger,
    private readonly opts: BudgetMonitorOptions,
  ) {
    this.now = opts.now ?? (() => new Date());
    this.task = new PeriodicTask(
      () => this.rereads.run(this.db, currentMonth(this.now()).month, () => this.refresh()),
      {
        what: 'budget monitor: spend re-read',
        logger,
        pauseMs: opts.intervalMs,
      },
    );
  }

  /** Month-to-date spend in USD (decimal text) of a budgeted account; undefined without a budget. */
  monthToDateSpend(accountId: string): string | undefined {
    return this.states.get(accountId)?.spend;
  }

  /** The budget, hard-cap flag and month-to-date spend of an account; undefined without a budget. */
  budgetOf(accountId: string): BudgetSnapshot | undefined {
    return this.states.get(accountId);
  }

  /** The hard cap's ledger, told after every re-read which of its costs the spend now shows. */
  attachLedger(ledger: SpendLedger): void {
    this.ledger = ledger;
  }

  async start(): Promise<void> {
    // The first read happens before the daemon serves, so the hard cap starts informed.
    await this.task.start('now');
  }

  stop(): Promise<void> {
    return this.task.stop();
  }

  /** One pass: re-read spend, fire what is crossed. Returns the levels this call fired. */
  async refresh(): Promise<{ account: string; level: number }[]> {
    const window = currentMonth(this.now());
    const { rows, seen } = await this.readSpend(window);
    const refreshedAt = new Date();
    // One synchronous step: the new spend and the ledger's costs it holds change together.
    this.states = new Map(rows.map((r) => [r.account_id, snapshot(r, window.month, refreshedAt)]));
    this.ledger?.seen(seen, window.month);
    const fired: { account: string; level: number }[] = [];
    for (const row of rows) {
      const state = this.states.get(row.account_id)!;
      const due = LEVELS.filter((l) => reached(state.spendUnits, state.budgetUnits, l) && !row.fired.includes(l));
      for (const level of due) {
        // Ascending: a jump from 0 to 120% sends 50, then 80, then 100.
        const alert = await composeAlert(this.db, {
          type: 'budget.threshold',
          accountId: row.account_id,
          account: row.account,
          window,
          level,
          spend: row.spend,
          budget: row.budget,
          createdAt: this.now(),
          budgetRef: {
            budget_id: accountBudgetId(row.account_id),
            scope: { kind: 'account', key: null, value: null },
            window: 'month',
            timezone: 'UTC',
            window_start: isoInZone(Date.parse(`${window.from}T00:00:00Z`), 'UTC'),
            window_end: isoInZone(Date.parse(`${window.to}T00:00:00Z`), 'UTC'),
          },
        });
        const result = await fireLevel(this.db, {
          accountId: row.account_id,
          month: window.month,
          level,
          eventId: alert.id,
          spend: row.spend,
          budget: row.budget,
          payload: alert,
        });
        if (!result.fired) continue; // another sidecar fired it first, or the budget just changed
        state.levelsFired.push(level);
        fired.push({ account: row.account, level });
        this.logger.info(
          { account: row.account, month: window.month, level, channels: result.queued, event_id: alert.id },
          'budget level reached; alert queued',
        );
      }
    }
    return fired;
  }

  /** Spend, and which of the ledger's events that spend holds, from one snapshot. */
  private readSpend(window: ReturnType<typeof currentMonth>): Promise<{ rows: BudgetRow[]; seen: string[] }> {
    const { sql, params } = budgetStatesQuery(window);
    return readWithSeen<BudgetRow>(
      this.db,
      sql,
      params,
      () => this.ledger?.unseenEvents() ?? [],
      'meter_budget_states',
    );
  }
}

function snapshot(r: BudgetRow, month: string, refreshedAt: Date): BudgetSnapshot {
  const budgetUnits = toUnits(r.budget);
  const spendUnits = toUnits(r.spend);
  return {
    accountId: r.account_id,
    account: r.account,
    month,
    budget: formatUnits(budgetUnits),
    budgetUnits,
    hardCap: r.hard_cap,
    spend: formatUnits(spendUnits),
    spendUnits,
    levelsFired: [...r.fired],
    refreshedAt,
  };
}
