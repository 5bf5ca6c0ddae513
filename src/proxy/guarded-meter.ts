import type { IncomingHttpHeaders } from 'node:http';
import type { Logger } from '../log.js';
import type { CallMeter, CallOutcome, CallStart, Metering } from '../metering/types.js';

/** Metering must never break a call: whatever it throws is logged (once per call) and dropped. */
export class GuardedMeter implements CallMeter {
  private failed = false;

  constructor(
    private readonly inner: CallMeter | undefined,
    private readonly logger: Pick<Logger, 'error'>,
    /** Called once the call is over when no usage event will come of it (the metering failed
     *  to begin or to end): frees what waited for that event (a hard-cap reservation). */
    private readonly noEvent?: () => void,
  ) {}

  static begin(metering: Metering, call: CallStart, logger: Pick<Logger, 'error'>, noEvent?: () => void): GuardedMeter {
    try {
      return new GuardedMeter(metering.begin(call), logger, noEvent);
    } catch (err) {
      logger.error({ err, provider: call.provider }, 'metering: begin failed');
      return new GuardedMeter(undefined, logger, noEvent);
    }
  }

  private fail(step: string, err: unknown): void {
    if (!this.failed) this.logger.error({ err }, `metering: ${step} failed`);
    this.failed = true;
  }

  requestBody(body: Buffer | undefined): void {
    try {
      this.inner?.requestBody(body);
    } catch (err) {
      this.fail('requestBody', err);
    }
  }

  responseHead(status: number, headers: IncomingHttpHeaders, at?: number): void {
    try {
      this.inner?.responseHead(status, headers, at);
    } catch (err) {
      this.fail('responseHead', err);
    }
  }

  responseChunk(chunk: Buffer, at?: number): void {
    try {
      this.inner?.responseChunk(chunk, at);
    } catch (err) {
      this.fail('responseChunk', err);
    }
  }

  end(outcome: CallOutcome): void {
    try {
      if (this.inner) return this.inner.end(outcome);
    } catch (err) {
      this.fail('end', err);
    }
    this.noEvent?.();
  }
}

/** Meters nothing: for tests and for a daemon built without metering. */
export const noMetering: Metering = {
  begin: () => ({ requestBody() {}, responseHead() {}, responseChunk() {}, end() {} }),
};
