/**
 * Background work on a timer, with one outage policy: a task that starts failing is warned about
 * once, and once more when it works again, with the outage's length and how many runs failed
 * (never a warning per run: a loop every 200 ms would log five a second while the store is down).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from './log.js';

export interface PeriodicOptions {
  /** What the task does, for the log: `budget monitor: spend re-read`. */
  what: string;
  logger: Pick<Logger, 'warn'>;
  /** The pause after each run ends; a function for a schedule (the next 00:00 UTC). */
  pauseMs: number | (() => number);
}

export class PeriodicTask {
  readonly #stop = new AbortController();
  #loop: Promise<void> = Promise.resolve();
  /** Date.now() when the current outage began, and its failed runs (none: no outage). */
  #outage: { since: number; failures: number } | undefined;

  constructor(
    private readonly task: () => Promise<unknown>,
    private readonly opts: PeriodicOptions,
  ) {}

  /** Runs the task now (`first: 'now'`) or after one pause, then after every pause until
   *  stop(). Resolves when the first run is over (it never rejects: a failure is logged). */
  start(first: 'now' | 'after-pause'): Promise<void> {
    const firstRun = first === 'now' ? this.run().then(() => {}) : Promise.resolve();
    this.#loop = firstRun.then(() => this.#repeat());
    return firstRun;
  }

  /** No more runs; waits for the one under way. */
  async stop(): Promise<void> {
    this.#stop.abort();
    await this.#loop;
  }

  /** One run under the outage policy; true when it succeeded. */
  async run(): Promise<boolean> {
    try {
      await this.task();
    } catch (err) {
      if (this.#outage) this.#outage.failures++;
      else {
        this.#outage = { since: Date.now(), failures: 1 };
        this.opts.logger.warn({ err }, `${this.opts.what} failed; retrying`);
      }
      return false;
    }
    if (this.#outage) {
      const { since, failures } = this.#outage;
      this.#outage = undefined;
      this.opts.logger.warn({ outageMs: Date.now() - since, failures }, `${this.opts.what} works again`);
    }
    return true;
  }

  async #repeat(): Promise<void> {
    const { signal } = this.#stop;
    const { pauseMs } = this.opts;
    while (!signal.aborted) {
      try {
        // ref: false: a pending pause never keeps the process alive.
        await sleep(typeof pauseMs === 'number' ? pauseMs : pauseMs(), undefined, { signal, ref: false });
      } catch {
        return; // stopped
      }
      await this.run();
    }
  }
}

/** Whether `p` settled within `ms` (it rejects as it would); the timer never outlives it. */
export async function settlesWithin(p: Promise<unknown> | unknown, ms: number): Promise<boolean> {
  const done = new AbortController();
  try {
    return await Promise.race([
      Promise.resolve(p).then(() => true),
      sleep(ms, false, { signal: done.signal, ref: false }),
    ]);
  } finally {
    done.abort();
  }
}

/** Runs tasks one after another (a pulse's re-read and a sweep's never interleave). */
export class Serial {
  #tail: Promise<unknown> = Promise.resolve();

  run<T>(task: () => Promise<T>): Promise<T> {
    const run = this.#tail.then(task, task);
    this.#tail = run.catch(() => {});
    return run;
  }
}
