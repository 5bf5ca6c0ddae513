import type { Logger } from '../log.js';
import type { Component } from '../component.js';
import { PeriodicTask } from '../periodic.js';
import { RereadSkip } from '../store/snapshot.js';
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

export interface BudgetMonitorOptions {
  /** How often spend is re-read; the daemon uses config.flushIntervalMs. */
  intervalMs: number;
  /** Clock (tests move it across a month boundary). */
  now?: () => Date;
}

/**
 * Re-reads every budgeted account's month-to-date spend from usage_daily each interval, keeps it
 * in memory (`budgetOf`), and fires the 50/80/100% levels it finds crossed, in order.
 */
export class BudgetMonitor implements Component {
  readonly name = 'budget';
  private states = new Map<string, BudgetSnapshot>();
  private readonly task: PeriodicTask;
  private readonly now: () => Date;
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

  async start(): Promise<void> {
    // The first read happens before the daemon serves.
    await this.task.start('now');
  }

  stop(): Promise<void> {
    return this.task.stop();
  }

  /** One pass: re-read spend, fire what is crossed. Returns the levels this call fired. */
  async refresh(): Promise<{ account: string; level: number }[]> {
    const window = currentMonth(this.now());
    const { sql, params } = budgetStatesQuery(window);
    const rows = await this.db.query<BudgetRow>(sql, params, { name: 'meter_budget_states' });
    const refreshedAt = new Date();
    this.states = new Map(rows.map((r) => [r.account_id, snapshot(r, window.month, refreshedAt)]));
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
