import type { Logger } from '../log.js';
import type { Pricer } from '../pricing/index.js';
import { MeteredCall, type CallMeterDeps } from './call-meter.js';
import { MeteringCounters } from './counters.js';
import type { UsageEvent } from './event.js';
import type { CallMeter, CallStart, EventSink, Metering, ResponseInfo } from './types.js';

export interface MeteringOptions {
  pricer: Pricer;
  sink: EventSink;
  logger: Pick<Logger, 'warn' | 'error'>;
  /** Largest non-streaming body parsed whole (beyond: head and tail only). */
  maxJsonBytes?: number;
  /** METER_MAX_DECODED_BYTES. */
  maxDecodedBytes?: number;
}

/** The proxy's Metering: one MeteredCall per call, every event counted, then handed to the sink. */
export class MeteringService implements Metering {
  readonly counters = new MeteringCounters();
  private readonly warnedUnpriced = new Set<string>();
  /** Shared by every call: nothing in it is per call, so it is built once, not per request. */
  private readonly deps: CallMeterDeps;

  /** The prices calls are metered with (OpenTelemetry asks which models are known). */
  get pricer(): Pricer {
    return this.opts.pricer;
  }

  constructor(private readonly opts: MeteringOptions) {
    this.deps = {
      pricer: opts.pricer,
      sink: { push: (event) => this.deliver(event) },
      counters: this.counters,
      onError: (step, err, c) =>
        opts.logger.error(
          {
            err,
            provider: c.provider,
            eventId: c.id,
          },
          `metering: ${step} failed; the call is metered from what was seen`,
        ),
      ...(opts.maxJsonBytes ? { maxJsonBytes: opts.maxJsonBytes } : {}),
      ...(opts.maxDecodedBytes ? { maxDecodedBytes: opts.maxDecodedBytes } : {}),
    };
  }

  /** Hands every final event, with its call, to `fn` too (src/otel); a failure in it is logged
   *  and never reaches the call. */
  onFinalized(fn: (event: UsageEvent, call: CallStart, response: ResponseInfo) => void): void {
    this.deps.finalized = (event, call, response) => {
      try {
        fn(event, call, response);
      } catch (err) {
        this.opts.logger.error({ err: { message: (err as Error).message } }, 'metering: an event observer failed');
      }
    };
  }

  begin(call: CallStart): CallMeter {
    return new MeteredCall(call, this.deps);
  }

  private deliver(event: UsageEvent): void {
    if (event.unpriced) this.warnUnpriced(event);
    try {
      this.opts.sink.push(event);
    } catch (err) {
      this.counters.internalErrors++;
      this.opts.logger.error({ err, eventId: event.id }, 'metering: the event sink failed');
    }
  }

  /** Once per provider/model (bounded): an operator can add the price in METER_PRICES_FILE. */
  private warnUnpriced(event: UsageEvent): void {
    const name = `${event.provider}/${event.model}`;
    if (this.warnedUnpriced.has(name) || this.warnedUnpriced.size >= 1000) return;
    this.warnedUnpriced.add(name);
    this.opts.logger.warn(
      { provider: event.provider, model: event.model, requestedModel: event.requestedModel },
      'no price known for this model: its calls are recorded with cost 0 and flagged unpriced (add it to METER_PRICES_FILE)',
    );
  }
}
