import type { UsageEvent, UsageSource } from './event.js';

/** Distinct unpriced provider/model names remembered; beyond this only the total grows. */
const MAX_UNPRICED_NAMES = 200;

/**
 * What the metering has done since start: events by usage source, calls no price was found
 * for (cost recorded as 0 and flagged; the price list or METER_PRICES_FILE needs the model),
 * and internal failures (each still produced an event). Plain numbers: a /metrics endpoint or
 * the logs read them.
 */
export class MeteringCounters {
  events = 0;
  readonly bySource: Record<UsageSource, number> = { provider: 0, estimated: 0, none: 0 };
  unpriced = 0;
  /** `provider/model` → unpriced calls, for telling the operator which prices are missing. */
  readonly unpricedModels = new Map<string, number>();
  internalErrors = 0;

  record(event: UsageEvent): void {
    this.events++;
    this.bySource[event.usageSource]++;
    if (event.unpriced) {
      this.unpriced++;
      const name = `${event.provider}/${event.model}`;
      const n = this.unpricedModels.get(name);
      if (n !== undefined) this.unpricedModels.set(name, n + 1);
      else if (this.unpricedModels.size < MAX_UNPRICED_NAMES) this.unpricedModels.set(name, 1);
    }
  }

  snapshot() {
    return {
      events: this.events,
      bySource: { ...this.bySource },
      unpriced: this.unpriced,
      unpricedModels: Object.fromEntries(this.unpricedModels),
      internalErrors: this.internalErrors,
    };
  }
}
