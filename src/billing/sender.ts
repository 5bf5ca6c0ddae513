/**
 * The daemon's billing loop, off the hot path: every interval it derives what is due from the
 * stored usage events (src/billing/derive.ts) and sends what is due (src/billing/outbox.ts) to
 * Stripe or a CloudEvents receiver. Every sidecar runs it; the database decides which one
 * derives a link and which one sends an item, so the fleet sends each item exactly once.
 */
import type { Component, DaemonContext } from '../component.js';
import type { BillingConfig } from '../config.js';
import type { Logger } from '../log.js';
import type { DaemonMetrics } from '../metrics/registry.js';
import { PeriodicTask } from '../periodic.js';
import { retryDelayMs, type RetryPolicy } from '../alerts/backoff.js';
import type { Db } from '../store/types.js';
import { sendCloudEvents } from './cloudevents.js';
import { DEFAULT_DERIVE, deriveAll, STRIPE_WINDOW_MS, type DeriveOptions } from './derive.js';
import type { BillingTarget } from './links.js';
import { claimDueItems, settleItems, type ClaimedItem, type Outcome } from './outbox.js';
import { billingTotals } from './status.js';
import { StripeSender } from './stripe.js';

export interface BillingOptions {
  intervalMs: number;
  derive: DeriveOptions;
  /** How long claimed items are held; a receiver's answer is awaited a third of it at most. */
  leaseMs: number;
  /** Items claimed per round. */
  batchSize: number;
  /** Backoff after a failed attempt without Retry-After (no give-up: Stripe's window expires items). */
  retry: Pick<RetryPolicy, 'firstRetryMs' | 'maxDelayMs'>;
}

const DEFAULT_RETRY = { firstRetryMs: 1_000, maxDelayMs: 600_000 };

type Result = 'sent' | 'retrying' | 'failed' | 'expired';
const RESULT_OF: Record<Outcome['kind'], Result> = {
  sent: 'sent',
  retry: 'retrying',
  failed: 'failed',
  expired: 'expired',
};

export class BillingSender implements Component {
  readonly name = 'billing';
  readonly #task: PeriodicTask;
  readonly #stripe: StripeSender | undefined;
  readonly #targets: BillingTarget[];
  readonly #timeoutMs: number;
  /** Items settled by this sidecar, by `link result`, for /metrics. */
  readonly #settled = new Map<string, number>();
  #stopped = false;

  constructor(
    private readonly db: Db,
    private readonly logger: Logger,
    config: Pick<BillingConfig, 'stripeApiKey' | 'stripeBaseUrl' | 'stripeEventName'>,
    private readonly opts: BillingOptions,
  ) {
    this.#timeoutMs = Math.min(20_000, Math.floor(opts.leaseMs / 3));
    this.#stripe = config.stripeApiKey
      ? new StripeSender(
          { apiKey: config.stripeApiKey, baseUrl: config.stripeBaseUrl, eventName: config.stripeEventName },
          this.#timeoutMs,
        )
      : undefined;
    // Without a key this sidecar leaves Stripe's items to one that has it.
    this.#targets = this.#stripe ? ['stripe', 'cloudevents'] : ['cloudevents'];
    this.#task = new PeriodicTask(() => this.pass(), { what: 'billing', logger, pauseMs: opts.intervalMs });
  }

  start(): void {
    void this.#task.start('after-pause');
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    await this.#task.stop();
  }

  /** Derives what is due, then sends it; returns the items settled. */
  async pass(): Promise<number> {
    await deriveAll(this.db, this.opts.derive);
    return this.deliverDue();
  }

  /** Sends what is due, round after round, until nothing is. */
  async deliverDue(): Promise<number> {
    let settled = 0;
    while (!this.#stopped) {
      const claimed = await claimDueItems(this.db, this.#targets, this.opts.batchSize, this.opts.leaseMs);
      if (claimed.length === 0) break;
      const byLink = new Map<string, ClaimedItem[]>();
      for (const item of claimed) byLink.set(item.link_id, [...(byLink.get(item.link_id) ?? []), item]);
      // Links side by side (one slow receiver does not hold the others back), each link's items in order.
      await Promise.all([...byLink.values()].map((items) => this.#deliverLink(items)));
      settled += claimed.length;
    }
    return settled;
  }

  async #deliverLink(items: ClaimedItem[]): Promise<void> {
    const first = items[0]!;
    if (first.target === 'cloudevents') {
      return this.#settle(items, await sendCloudEvents(first.url!, items, this.#timeoutMs));
    }
    for (let i = 0; i < items.length; i++) {
      const item = items[i]!;
      const outcome =
        item.at.getTime() + 59_000 < Date.now() - STRIPE_WINDOW_MS
          ? ({ kind: 'expired', error: 'older than Stripe accepts (35 days)' } as const)
          : await this.#stripe!.send(item);
      await this.#settle([item], outcome);
      // Rate limited: the link's other items wait as long (they were claimed; now released).
      if (outcome.kind === 'retry' && outcome.retryAfterMs !== undefined) {
        const rest = items.slice(i + 1);
        if (rest.length > 0) await this.#settle(rest, outcome, false);
        return;
      }
    }
  }

  async #settle(items: ClaimedItem[], outcome: Outcome, attempted = true): Promise<void> {
    const { link_id } = items[0]!;
    const retryInMs =
      outcome.kind === 'retry'
        ? (outcome.retryAfterMs ??
          retryDelayMs({ ...this.opts.retry, giveUpAfterMs: Infinity }, Math.max(...items.map((i) => i.attempts))))
        : 0;
    await settleItems(
      this.db,
      link_id,
      items.map((i) => i.id),
      outcome,
      retryInMs,
    );
    if (!attempted) return;
    const result = RESULT_OF[outcome.kind];
    const key = `${link_id} ${result}`;
    this.#settled.set(key, (this.#settled.get(key) ?? 0) + items.length);
    const fields = { link_id, target: items[0]!.target, items: items.length, attempt: items[0]!.attempts };
    if (outcome.kind === 'sent') this.logger.debug(fields, 'billing items sent');
    else if (outcome.kind === 'retry')
      this.logger.warn({ ...fields, error: outcome.error, retry_in_ms: retryInMs }, 'billing send failed; will retry');
    else this.logger.error({ ...fields, error: outcome.error }, `billing items ${outcome.kind}`);
  }

  /** Per link (its id only: never a customer, a tag value or an address). */
  registerMetrics(metrics: DaemonMetrics): void {
    let cache: { at: number; rows: Awaited<ReturnType<typeof billingTotals>> } | undefined;
    const totals = async () => {
      if (!cache || Date.now() - cache.at > 10_000) cache = { at: Date.now(), rows: await billingTotals(this.db) };
      return cache.rows;
    };
    const gauge = (
      name: string,
      help: string,
      pick: (t: { sent: number; pending: number; failed: number }) => number,
    ) =>
      metrics.gauge(name, help, ['link'], async (emit) => {
        for (const t of await totals().catch(() => [])) emit({ link: t.link }, pick(t));
      });
    gauge('meter_billing_sent_usd', 'USD the receiver acknowledged, per billing link (all months)', (t) => t.sent);
    gauge(
      'meter_billing_pending_usd',
      'USD billed and not yet acknowledged (failed items included), per billing link',
      (t) => t.pending,
    );
    gauge(
      'meter_billing_failed_items',
      'Billing items the receiver refused for good, per billing link',
      (t) => t.failed,
    );
    metrics.counter(
      'meter_billing_items_total',
      'Billing items this sidecar settled, by link and result (sent, retrying, failed, expired)',
      ['link', 'result'],
      (emit) => {
        for (const [key, n] of this.#settled) {
          const [link, result] = key.split(' ') as [string, string];
          emit({ link, result }, n);
        }
      },
    );
  }
}

/** The daemon's billing component, configured from METER_STRIPE_* and METER_BILLING_*. */
export function billingComponent(ctx: DaemonContext, opts: Partial<BillingOptions> = {}): BillingSender {
  const b = ctx.config.billing;
  const sender = new BillingSender(ctx.store, ctx.logger.child({ component: 'billing' }), b, {
    intervalMs: b.intervalMs,
    derive: { ...DEFAULT_DERIVE, settleMs: b.settleMs },
    leaseMs: b.leaseMs,
    batchSize: 100,
    retry: DEFAULT_RETRY,
    ...opts,
  });
  sender.registerMetrics(ctx.metrics);
  return sender;
}
