import type { Config } from '../config.js';
import type { Logger } from '../log.js';
import type { Component } from '../component.js';
import { PeriodicTask } from '../periodic.js';
import { RereadSkip } from '../store/snapshot.js';
import type { Db } from '../store/types.js';
import { Admissions } from './admission.js';
import { PlanBook } from './plans.js';
import { windowBounds } from '../calendar.js';
import { QuotaTracker } from './quota.js';
import { RateLimiter } from './rate-limit.js';
import { runRetention } from './retention.js';

export { Admissions, type Admission } from './admission.js';
export { PlanBook, type Plan } from './plans.js';

export interface PlansOptions {
  config: Pick<Config, 'keyRefreshMs' | 'flushIntervalMs'>;
  logger: Logger;
  store: Db;
  /** How often retention runs; default hourly. */
  retentionIntervalMs?: number;
}

/**
 * Plans in the daemon: the in-memory admission checks the proxy runs on every call, kept fresh
 * by timers (plans every key refresh, fleet call counts every flush interval), and the
 * retention job.
 */
export function createPlans({ config, logger, store, retentionIntervalMs = 3_600_000 }: PlansOptions) {
  const book = new PlanBook();
  const limiter = new RateLimiter();
  const quota = new QuotaTracker();
  const admissions = new Admissions(book, limiter, quota);
  const counts = new RereadSkip();
  const month = () => String(windowBounds('month', Date.now()).start);
  const tasks = [
    new PeriodicTask(
      async () => {
        await book.refresh(store);
        limiter.prune();
      },
      { what: 'plans: re-read', logger, pauseMs: config.keyRefreshMs },
    ),
    new PeriodicTask(() => counts.run(store, month(), () => quota.refresh(store)), {
      what: 'plans: call counts re-read',
      logger,
      pauseMs: config.flushIntervalMs,
    }),
    new PeriodicTask(() => runRetention(store, { logger }), {
      what: 'retention',
      logger,
      pauseMs: retentionIntervalMs,
    }),
  ];

  const component: Component = {
    name: 'plans',
    async start() {
      await book.refresh(store);
      await quota.refresh(store);
      for (const task of tasks) void task.start('after-pause');
    },
    async stop() {
      await Promise.all(tasks.map((task) => task.stop()));
    },
  };
  return { admissions, book, component };
}

export type PlansSetup = ReturnType<typeof createPlans>;
