import { PeriodicTask } from '../periodic.js';
import { setTimeout as delay } from 'node:timers/promises';
import { join } from 'node:path';
import type { Logger } from '../log.js';
import { settlesWithin } from '../periodic.js';
import type { UsageEvent } from '../metering/event.js';
import type { EventSink } from '../metering/types.js';
import type { Component } from '../component.js';
import { insertJson, isDataError } from './event-batch.js';
import { lineOf, slice, type EventRun } from './event-run.js';
import { Spool, type SpoolStats } from './spool.js';
import type { Db } from './types.js';

export interface EventWriterOptions {
  db: Db;
  logger: Logger;
  /** The spool directory (METER_DATA_DIR/spool). */
  spoolDir: string;
  /** Longest time an event waits in memory before it is spooled and shipped (METER_FLUSH_INTERVAL_MS). */
  flushIntervalMs: number;
  /** Events per statement. */
  batchSize?: number;
  segmentMaxEvents?: number;
  /** Longest wait between two attempts while the database is down. */
  maxBackoffMs?: number;
  /** How long stop() keeps trying to write what is left before leaving it in the spool. */
  stopTimeoutMs?: number;
}

export interface WriterStats extends SpoolStats {
  written: number;
  deadLettered: number;
  /** Failed attempts in a row (0 while the database answers). */
  failures: number;
  /** Failed attempts since start (each was retried). */
  failedAttempts: number;
  /** Statements that wrote a batch. */
  batches: number;
}

/** How long stop() tries when the database was already failing. */
const OUTAGE_STOP_MS = 1_000;

export const spoolDirOf = (dataDir: string) => join(dataDir, 'spool');

/**
 * The durable event pipeline: `push` (the proxy's EventSink) hands an event to the spool in
 * O(1) without waiting for anything; every flush interval — or as soon as a batch is full —
 * the spool is fsynced and durable events are shipped in batches of one statement each. A
 * database that is down costs nothing but a growing spool: the writer retries with backoff and
 * writes everything once it answers. Events the database rejects for their data are isolated
 * (halving the batch) and kept in the spool's dead-letter file.
 */
export class EventWriter implements EventSink, Component {
  readonly name = 'event-writer';
  private readonly spool: Spool<UsageEvent>;
  private readonly db: Db;
  private readonly log: Logger;
  private readonly interval: number;
  private readonly batchSize: number;
  private readonly maxBackoff: number;
  private readonly stopTimeout: number;
  private loop: PeriodicTask | undefined;
  private shipping: Promise<void> | undefined;
  private kicked = false;
  private retryAt = 0;
  private failures = 0;
  private failedAttempts = 0;
  private lastFailureLog = 0;
  private written = 0;
  private batches = 0;
  /** Date.now() when the backlog was last seen empty (the lag's bound when the oldest event is on disk only). */
  private caughtUpAt = Date.now();
  private deadLettered = 0;
  private stopping = false;
  private closed = false;
  private readonly writtenListeners: (() => void)[] = [];

  constructor(opts: EventWriterOptions) {
    this.db = opts.db;
    this.log = opts.logger;
    this.interval = opts.flushIntervalMs;
    // 500: a statement takes tens of ms, and a batch stays a few hundred kB (2,000-event batches
    // measured 20–40 MB more RSS under load, much of it PGlite's memory).
    this.batchSize = opts.batchSize ?? 500;
    this.maxBackoff = opts.maxBackoffMs ?? 5_000;
    this.stopTimeout = opts.stopTimeoutMs ?? 10_000;
    this.spool = new Spool<UsageEvent>({
      dir: opts.spoolDir,
      ...(opts.segmentMaxEvents ? { segmentMaxEvents: opts.segmentMaxEvents } : {}),
    });
  }

  /** `listener` runs after every batch the database took (budgets read their spend at once). */
  onWritten(listener: () => void): void {
    this.writtenListeners.push(listener);
  }

  private tellWritten(): void {
    for (const listener of this.writtenListeners) {
      try {
        listener();
      } catch (err) {
        this.log.error({ err }, 'a listener of written batches failed');
      }
    }
  }

  /** Never blocks, never throws: the call has been answered already. */
  push(event: UsageEvent): void {
    try {
      this.spool.push(event);
    } catch (err) {
      // Only an unserialisable event can get here (a bug): say so loudly rather than crash.
      this.log.error({ err, eventId: event?.id }, 'usage event could not be spooled');
      return;
    }
    // A full batch kicks a ship only when one can start: while a statement runs (or the database
    // is backing off) the ship loop or the interval takes the batch, and a kick would only fsync
    // a few lines on every turn of the event loop (thousands of fsyncs a second under load).
    if (
      !this.kicked &&
      !this.stopping &&
      (this.spool.wantsFlush || (this.spool.backlog >= this.batchSize && this.canShip()))
    ) {
      this.kicked = true;
      setImmediate(() => {
        this.kicked = false;
        this.tick();
      });
    }
  }

  start(): void {
    const { recovered, truncatedTails } = this.spool.open();
    if (recovered > 0) this.log.info({ events: recovered }, 'replaying usage events spooled by a previous run');
    if (truncatedTails > 0)
      this.log.warn({ segments: truncatedTails }, 'spool lines cut short by a crash were dropped');
    // tick() never throws: a failed write is the writer's own backoff and log, not the loop's.
    this.loop = new PeriodicTask(async () => this.tick(), {
      what: 'usage event writer',
      logger: this.log,
      pauseMs: this.interval,
    });
    void this.loop.start('after-pause');
    if (recovered > 0) this.tick();
  }

  /** Writes everything queued (bounded by stopTimeoutMs); what is left stays in the spool. */
  async stop(): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    await this.loop?.stop();
    // A database already failing gets one more attempt, not the whole stop timeout: the events
    // are safe in the spool, and the exit stays short for the orchestrator's grace period.
    const deadline = Date.now() + (this.failures > 0 ? Math.min(this.stopTimeout, OUTAGE_STOP_MS) : this.stopTimeout);
    const left = () => deadline - Date.now();
    if (this.failures > 0) {
      this.retryAt = 0;
      this.tick();
    }
    for (;;) {
      if (this.shipping) await settlesWithin(this.shipping, Math.max(0, left()));
      if (this.spool.backlog === 0 || left() <= 0) break;
      await sleep(Math.min(this.failures > 0 ? this.backoff() : 5, left()));
      this.retryAt = 0;
      this.tick();
    }
    this.closed = true; // an attempt still under way stops after its statement
    const remaining = await this.spool.close();
    if (remaining > 0) {
      this.log.warn(
        { events: remaining, spool: this.spool.dir },
        `${remaining} usage events could not be written before exit and stay in the spool for the next start`,
      );
    } else {
      this.log.info({ written: this.written }, 'all usage events written');
    }
  }

  stats(): WriterStats {
    return {
      ...this.spool.stats(),
      written: this.written,
      deadLettered: this.deadLettered,
      failures: this.failures,
      failedAttempts: this.failedAttempts,
      batches: this.batches,
    };
  }

  /** Bytes of the events waiting to be written (see Spool.backlogBytes). */
  backlogBytes(): number {
    return this.spool.backlogBytes();
  }

  /** Seconds the oldest unwritten event has waited since its call ended (0 when none waits). */
  async lagSeconds(now = Date.now()): Promise<number> {
    if (this.spool.backlog === 0) {
      this.caughtUpAt = now;
      return 0;
    }
    const oldest = await this.spool.oldest().catch(() => undefined);
    // An event is pushed when its call ends: arrival time plus its latency.
    const pushedAt = oldest ? Date.parse(oldest.time) + oldest.latencyMs : this.caughtUpAt;
    return Math.max(0, now - pushedAt) / 1000;
  }

  /** Where events the database rejected for their data are kept (JSON lines with the reason). */
  get deadLetterPath(): string {
    return this.spool.deadLetterPath;
  }

  /** Resolves once everything pushed so far is written (tests, admin). */
  async drain(timeoutMs = 30_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (this.spool.backlog > 0) {
      if (Date.now() > deadline)
        throw new Error(`writer did not drain in ${timeoutMs} ms: ${JSON.stringify(this.stats())}`);
      this.tick();
      await sleep(10);
    }
  }

  private canShip(): boolean {
    return this.shipping === undefined && Date.now() >= this.retryAt;
  }

  /** Every flush interval: make buffered events durable, then ship unless backing off. */
  private tick(): void {
    // The spool is fsynced every interval even while a slow statement or a backoff holds the
    // shipping back: a crash then loses at most one interval, whatever the database does.
    if (this.shipping || Date.now() < this.retryAt) {
      this.spool.flush().catch((err: Error) => this.spoolFailed(err));
      return;
    }
    this.shipping = this.ship().finally(() => {
      this.shipping = undefined;
    });
  }

  private async ship(): Promise<void> {
    try {
      while (!this.closed) {
        await this.spool.flush();
        const batch = await this.spool.read(this.batchSize);
        if (!batch) return;
        await this.write(batch);
        this.tellWritten();
        if (this.closed) return; // the spool keeps them; the next start replays them (a no-op)
        await this.spool.ack(batch);
        if (this.failures > 0) {
          this.log.info(
            { failures: this.failures, backlog: this.spool.stats().backlog },
            'database reachable again: writing the spooled usage events',
          );
          this.failures = 0;
        }
        // A part batch was all there was: what arrived meanwhile waits for the next tick (at
        // most one interval), so a steady trickle costs one fsync and one statement per
        // interval rather than per few calls. Full batches (a backlog) go on at once.
        if (batch.count < this.batchSize && !this.stopping) return;
      }
    } catch (err) {
      this.failed(err as Error);
    }
  }

  /** One statement for the batch; a data error is narrowed down by halves to the bad events. */
  private async write(run: EventRun): Promise<void> {
    try {
      const { inserted } = await insertJson(this.db, run.json);
      this.written += inserted;
      this.batches++;
    } catch (err) {
      if (!isDataError(err)) throw err;
      if (run.count === 1) {
        const line = lineOf(run, 0);
        await this.spool.deadLetter([line], describe(err));
        this.deadLettered++;
        const eventId = idOf(line);
        this.log.error(
          { eventId, err: describe(err), file: this.spool.deadLetterPath },
          'usage event rejected by the database: moved to the dead-letter file',
        );
        return;
      }
      const half = run.count >> 1;
      await this.write(slice(run, 0, half));
      await this.write(slice(run, half, run.count));
    }
  }

  private failed(err: Error): void {
    this.failures++;
    this.failedAttempts++;
    this.retryAt = Date.now() + this.backoff();
    const now = Date.now();
    if (this.failures === 1 || now - this.lastFailureLog > 30_000) {
      this.lastFailureLog = now;
      this.log.warn(
        { err: describe(err), failures: this.failures, backlog: this.spool.stats().backlog },
        'usage events not written yet (they wait in the spool); retrying with backoff',
      );
    }
  }

  private spoolFailed(err: Error): void {
    this.log.error(
      { err: describe(err), dir: this.spool.dir },
      'spool write failed; events stay in memory and are retried',
    );
  }

  /** Exponential from the flush interval up to maxBackoff, with jitter so sidecars spread out. */
  private backoff(): number {
    const base = Math.min(this.maxBackoff, this.interval * 2 ** Math.min(this.failures, 16));
    return Math.round(base * (0.75 + Math.random() * 0.5));
  }
}

/** The event's id, for the log (undefined for a line that is not JSON: a torn write). */
function idOf(line: string): string | undefined {
  try {
    return (JSON.parse(line) as UsageEvent).id;
  } catch {
    return undefined;
  }
}

function describe(err: unknown): string {
  const e = err as { message?: string; code?: string };
  return e?.code ? `${e.code}: ${e.message}` : String(e?.message ?? err);
}

const sleep = (ms: number) => delay(Math.max(0, ms));
