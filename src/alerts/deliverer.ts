import type { Logger } from '../log.js';
import type { DaemonMetrics } from '../metrics/registry.js';
import type { Component } from '../component.js';
import { PeriodicTask } from '../periodic.js';
import type { Db } from '../store/types.js';
import { DEFAULT_RETRY_POLICY, retryDelayMs, type RetryPolicy } from './backoff.js';
import { sendToChannel } from './channels/index.js';
import { claimDueDeliveries, recordDeliveryAttempt, type ClaimedDelivery } from './outbox.js';

export interface AlertDelivererOptions {
  /** How often the outbox is polled for due deliveries. */
  pollMs: number;
  retry: RetryPolicy;
  /** Longest one attempt may take. */
  timeoutMs: number;
  /** Deliveries claimed per round. */
  batchSize: number;
  smtpUrl?: string;
}

export const DEFAULT_DELIVERER_OPTIONS: Readonly<AlertDelivererOptions> = Object.freeze({
  pollMs: 1_000,
  retry: DEFAULT_RETRY_POLICY,
  timeoutMs: 10_000,
  batchSize: 20,
});

/**
 * The outbox deliverer: claims due deliveries, sends each to its channel, logs every attempt,
 * retries failures with exponential backoff and gives up after the policy's window. Delivery is
 * at least once (a sidecar dying mid-send leaves the row due again); receivers drop duplicates
 * by the event id.
 */
export class AlertDeliverer implements Component {
  readonly name = 'alerts';
  private readonly task: PeriodicTask;
  private stopped = false;
  /** A run that wake() started, until it ends. */
  private woken: Promise<unknown> | undefined;
  /** Attempts by `kind result` (result: delivered, retrying, failed), for /metrics. */
  private readonly attempts = new Map<string, number>();

  constructor(
    private readonly db: Db,
    private readonly logger: Logger,
    private readonly opts: AlertDelivererOptions,
  ) {
    this.task = new PeriodicTask(() => this.deliverDue(), {
      what: 'alert outbox: delivery',
      logger,
      pauseMs: opts.pollMs,
    });
  }

  start(): void {
    void this.task.start('now');
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.task.stop();
    await this.woken;
  }

  /** Delivers what is due now, off to the side (the pulse found deliveries due); never two
   *  such runs at once. A run under way on the timer is no harm: claims are leased. */
  wake(): void {
    if (this.stopped || this.woken) return;
    this.woken = this.task.run().finally(() => (this.woken = undefined));
  }

  /** Delivers everything due now, round after round; returns how many attempts were made. */
  async deliverDue(): Promise<number> {
    // The lease outlasts an attempt, so no other sidecar picks up a delivery still in flight.
    const leaseMs = this.opts.timeoutMs * 3 + 30_000;
    let attempts = 0;
    for (;;) {
      const claimed = await claimDueDeliveries(this.db, this.opts.batchSize, leaseMs);
      if (claimed.length === 0) return attempts;
      // One delivery per channel per round (the claim's ordering rule): send them side by side.
      await Promise.all(claimed.map((d) => this.deliver(d)));
      attempts += claimed.length;
      if (this.stopped) return attempts;
    }
  }

  private async deliver(d: ClaimedDelivery): Promise<void> {
    const result = await sendToChannel(d.channel, d.alert, {
      timeoutMs: this.opts.timeoutMs,
      smtpUrl: this.opts.smtpUrl,
    });
    const retryInMs = retryDelayMs(this.opts.retry, d.attempts);
    const status = await recordDeliveryAttempt(this.db, d, result, retryInMs, this.opts.retry.giveUpAfterMs);
    // Channel id and kind only: targets (Slack/Teams URLs) and secrets are credentials.
    const outcome = result.ok ? 'delivered' : status === 'failed' ? 'failed' : 'retrying';
    const key = `${d.channel.kind} ${outcome}`;
    this.attempts.set(key, (this.attempts.get(key) ?? 0) + 1);
    const fields = {
      delivery_id: d.id,
      event_id: d.alert.id,
      channel_id: d.channel.id,
      kind: d.channel.kind,
      attempt: d.attempts,
    };
    if (result.ok) this.logger.info({ ...fields, duration_ms: result.durationMs }, 'alert delivered');
    else if (status === 'failed')
      this.logger.error({ ...fields, error: result.error }, 'alert delivery failed for good; giving up');
    else
      this.logger.warn({ ...fields, error: result.error, retry_in_ms: retryInMs }, 'alert delivery failed; will retry');
  }

  /** meter_alert_deliveries_total{channel, result}: channel kinds only, never targets. */
  registerMetrics(metrics: DaemonMetrics): void {
    metrics.counter(
      'meter_alert_deliveries_total',
      'Budget alert delivery attempts, by channel kind and result (delivered, retrying: will be retried, failed: given up)',
      ['channel', 'result'],
      (emit) => {
        for (const [key, n] of this.attempts) {
          const [channel, result] = key.split(' ') as [string, string];
          emit({ channel, result }, n);
        }
      },
    );
  }
}
