import type { Logger } from '../log.js';
import type { Component } from '../component.js';
import { PeriodicTask } from '../periodic.js';
import type { Db, Queryable } from '../store/types.js';

/**
 * The fleet's change counter (sql/090_fleet.sql): plans, budgets and limit overrides bump it in
 * the transaction that changes them, so a sidecar reads one row each interval and reloads what
 * it keeps in memory only when that row moved. A reload that fails is tried again next time.
 */
export class ChangeWatcher implements Component {
  readonly name = 'changes';
  readonly #reloads: ((db: Queryable) => Promise<void>)[] = [];
  readonly #unchanged: (() => void)[] = [];
  readonly #task: PeriodicTask;
  #seen: string | undefined;

  constructor(
    private readonly db: Db,
    logger: Logger,
    intervalMs: number,
  ) {
    this.#task = new PeriodicTask(() => this.check(), { what: 'changes: re-read', logger, pauseMs: intervalMs });
  }

  /** `reload` runs at start and after every change; `unchanged` after a check that found none
   *  (what was read is confirmed current). */
  watch(reload: (db: Queryable) => Promise<void>, unchanged?: () => void): void {
    this.#reloads.push(reload);
    if (unchanged) this.#unchanged.push(unchanged);
  }

  async check(): Promise<boolean> {
    const [row] = await this.db.query<{ version: string }>('SELECT version FROM meter_changes WHERE id = 1', [], {
      name: 'meter_changes_version',
    });
    const version = row?.version ?? '0';
    if (version === this.#seen) {
      for (const confirm of this.#unchanged) confirm();
      return false;
    }
    // Read before reloading: a change committed meanwhile moves the counter again.
    for (const reload of this.#reloads) await reload(this.db);
    this.#seen = version;
    return true;
  }

  async start(): Promise<void> {
    await this.check();
    void this.#task.start('after-pause');
  }

  stop(): Promise<void> {
    return this.#task.stop();
  }
}
