import type { Config } from '../config.js';
import type { Logger } from '../log.js';
import { Pricer } from '../pricing/index.js';
import type { Component, DaemonContext } from '../component.js';
import type { Db } from '../store/types.js';
import { privateDir } from '../store/private-files.js';
import { EventWriter, spoolDirOf, type EventWriterOptions } from '../store/writer.js';
import { registerWriterMetrics } from '../store/writer-metrics.js';
import { MeteringService } from './metering.js';
import { UsageMetrics } from './usage-metrics.js';

export { MeteringService } from './metering.js';
export { MeteringCounters } from './counters.js';
export { parseTags } from './tags.js';
export { uuidv7 } from './ids.js';
export type { CallMeter, CallStart, EventSink, Metering } from './types.js';
export type { UsageEvent, UsageSource } from './event.js';
import type { UsageEvent } from './event.js';

export interface MeteringDeps {
  config: Pick<Config, 'dataDir' | 'flushIntervalMs' | 'pricesFile'> & Partial<Pick<Config, 'limits'>>;
  logger: Logger;
  store: Db;
  /** Default: the catalogue plus METER_PRICES_FILE (config.pricesFile). */
  pricer?: Pricer;
  /** Tuning for tests (batch size, memory bound, timeouts). */
  writer?: Partial<Omit<EventWriterOptions, 'db' | 'logger'>>;
}

export interface MeteringSetup {
  /** What the proxy calls for every call. */
  metering: MeteringService;
  /** The durable pipeline behind it (the EventSink). */
  writer: EventWriter;
  /** The daemon component: replays the spool on start, writes everything on stop. */
  component: Component;
  /** The prices in force (the hard cap prices worst cases with the same table). */
  pricer: Pricer;
  /** Calls `listener` with every event as it is recorded (the hard cap settles reservations). */
  observe(listener: (event: UsageEvent) => void): void;
}

/** The metering and its event writer, wired together. The pricer is built here, so a bad
 *  METER_PRICES_FILE stops the daemon at start. */
export function createMetering(deps: MeteringDeps): MeteringSetup {
  const pricer = deps.pricer ?? new Pricer(deps.config.pricesFile ? { pricesFile: deps.config.pricesFile } : {});
  privateDir(deps.config.dataDir); // the spool's parent: private even when a database holds the rest
  const writer = new EventWriter({
    db: deps.store,
    logger: deps.logger,
    spoolDir: spoolDirOf(deps.config.dataDir),
    flushIntervalMs: deps.config.flushIntervalMs,
    ...deps.writer,
  });
  const listeners: ((event: UsageEvent) => void)[] = [];
  const sink = {
    push(event: UsageEvent) {
      writer.push(event);
      for (const listener of listeners) {
        try {
          listener(event);
        } catch (err) {
          deps.logger.error({ err }, 'usage event listener failed');
        }
      }
    },
  };
  const metering = new MeteringService({
    pricer,
    sink,
    logger: deps.logger,
    maxDecodedBytes: deps.config.limits?.maxDecodedBytes,
  });
  return { metering, writer, pricer, component: writer, observe: (listener) => listeners.push(listener) };
}

/** The daemon's metering: the proxy records with it, and /metrics reports its counters and
 *  its writer. Its component replays the spool on start and writes everything on stop (start
 *  it before the proxy: stopped after it, so every event of a drained call is written). `writer`
 *  tunes the event writer (tests). */
export function daemonMetering(ctx: DaemonContext, writer?: MeteringDeps['writer']): MeteringSetup {
  const setup = createMetering(writer ? { ...ctx, writer } : ctx);
  const usage = new UsageMetrics(ctx.config.metricsModels);
  setup.observe((event) => usage.record(event));
  usage.register(ctx.metrics, setup.metering.counters);
  registerWriterMetrics(ctx.metrics, setup.writer);
  return setup;
}
