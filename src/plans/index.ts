import type { Config } from '../config.js';
import type { Logger } from '../log.js';
import type { Component } from '../component.js';
import { PeriodicTask } from '../periodic.js';
import type { Db } from '../store/types.js';
import type { ChangeWatcher } from '../pulse/changes.js';
import { PlanBook } from './plans.js';
import { runRetention } from './retention.js';

export { PlanBook, type Plan } from './plans.js';

export interface PlansOptions {
  config: Pick<Config, 'keyRefreshMs' | 'flushIntervalMs'>;
  logger: Logger;
  store: Db;
  /** How often retention runs; default hourly. */
  retentionIntervalMs?: number;
}

/**
 * Plans in the daemon: the plans in memory for admission (re-read when the fleet's change
 * counter moves), and the retention job.
 */
export function createPlans({ logger, store, retentionIntervalMs = 3_600_000 }: PlansOptions, changes: ChangeWatcher) {
  const book = new PlanBook();
  changes.watch((db) => book.refresh(db));
  const retention = new PeriodicTask(() => runRetention(store, { logger }), {
    what: 'retention',
    logger,
    pauseMs: retentionIntervalMs,
  });
  const component: Component = {
    name: 'plans',
    async start() {
      void retention.start('after-pause');
    },
    stop: () => retention.stop(),
  };
  return { book, component };
}

export type PlansSetup = ReturnType<typeof createPlans>;
