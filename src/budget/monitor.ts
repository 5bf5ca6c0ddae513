import type { Logger } from '../log.js';
import type { Component } from '../component.js';
import { PeriodicTask, Serial } from '../periodic.js';
import type { Pulse } from '../pulse/changes.js';
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
  /** How often spend is re-read whatever the pulses found (window turns, repricing, replays). */
  sweepMs: number;
  /** The accounts this sidecar serves (the daemon's ServedAccounts); without it, every account. */
  served?: () => string[];
  /** Clock (tests move it across a month boundary). */
  now?: () => Date;
}

/**
 * Re-reads budgeted accounts' month-to-date spend from usage_daily, keeps it in memory
 * (`budgetOf`), and fires the 50/80/100% levels it finds crossed, in order. In the daemon it
 * reads what the pulse (pulse/changes.ts) says moved: the accounts with new events, every served
 * account after a change; and the served accounts once a sweep.
 */
export class BudgetMonitor implements Component {
  readonly name = 'budget';
  private states = new Map<string, BudgetSnapshot>();
  private readonly task: PeriodicTask;
  private readonly now: () => Date;
  private readonly rereads = new RereadSkip();
  private readonly serial = new Serial();
  /** Per account: what this sidecar metered since its spend was last read (units). */
  private readonly unread = new Map<string, bigint>();
  /** Accounts read at least once (the others may have a budget not read yet). */
  private readonly known = new Set<string>();
  /** Told when a level fired (the alert deliverer sends at once). */
  onFired: (() => void) | undefined;

  constructor(
    private readonly db: Db,
    private readonly logger: Logger,
    private readonly opts: BudgetMonitorOptions,
  ) {
    this.now = opts.now ?? (() => new Date());
    const sweep = () => this.rereads.run(db, currentMonth(this.now()).month, () => this.refresh(opts.served?.()));
    this.task = new PeriodicTask(sweep, {
      what: 'budget monitor: spend re-read',
      logger,
      pauseMs: opts.sweepMs,
    });
  }

  /** The pulse's share: every served account after a change, else those with new events. */
  async pulse(p: Pulse): Promise<void> {
    if (p.changed) await this.refresh(this.opts.served?.());
    else if (p.dirty.size > 0) await this.refresh([...p.dirty]);
  }

  /** This sidecar's costs per account since the last nudge, after the writer committed them:
   *  an account whose spend as last read plus those costs reaches a level not fired yet is read
   *  again at once, so its alert leaves within a flush interval carrying the spend at the crossing. */
  nudge(costs: ReadonlyMap<string, bigint>): Promise<unknown> {
    const due: string[] = [];
    for (const [id, units] of costs) {
      const s = this.states.get(id);
      if (!s) {
        if (!this.known.has(id)) due.push(id);
        continue;
      }
      const unread = (this.unread.get(id) ?? 0n) + units;
      this.unread.set(id, unread);
      if (LEVELS.some((l) => !s.levelsFired.includes(l) && reached(s.spendUnits + unread, s.budgetUnits, l)))
        due.push(id);
    }
    return this.refresh(due);
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

  /** One pass over some accounts (all without `accounts`): re-read spend, fire what is
   *  crossed. Returns the levels this call fired. */
  refresh(accounts?: string[]): Promise<{ account: string; level: number }[]> {
    return accounts?.length === 0 ? Promise.resolve([]) : this.serial.run(() => this.read(accounts));
  }

  private async read(accounts?: string[]): Promise<{ account: string; level: number }[]> {
    const window = currentMonth(this.now());
    const { sql, params } = budgetStatesQuery(window, undefined, accounts);
    const rows = await this.db.query<BudgetRow>(sql, params, { name: 'meter_budget_states' });
    const refreshedAt = new Date();
    if (accounts) {
      for (const id of accounts) {
        this.states.delete(id);
        this.unread.delete(id);
        this.known.add(id);
      }
    } else {
      this.states.clear();
      this.unread.clear();
    }
    for (const r of rows) this.states.set(r.account_id, snapshot(r, window.month, refreshedAt));
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
        this.onFired?.();
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
