/**
 * Stripe Billing meter events through Stripe's official SDK (`stripe.billing.meterEvents.create`,
 * POST /v1/billing/meter_events, form-encoded, `Authorization: Bearer` the secret key), one per
 * item: the link's customer, the item's whole micro-dollars as the value, the minute's last
 * second as the timestamp and a deterministic identifier, so a retry or a second sidecar never
 * bills twice. The SDK's own retries are off: the outbox retries with backoff and records each
 * attempt.
 */
import Stripe from 'stripe';
import type { Secret } from '../secret.js';
import type { ClaimedItem, Outcome } from './outbox.js';

export interface StripeSettings {
  apiKey: Secret;
  /** METER_STRIPE_BASE_URL: an origin (the SDK adds /v1/…). */
  baseUrl: string;
  eventName: string;
}

/** `meter_<link id>_<YYYYMMDDHHmm>_<n>`: at most 36 characters (Stripe allows 100). */
export function meterEventIdentifier(linkId: string, minute: Date, seq: number): string {
  const stamp = minute.toISOString().slice(0, 16).replace(/[-T:]/g, '');
  return `meter_${linkId}_${stamp}_${seq}`;
}

/** What Stripe answers to an identifier it has seen (within about 24 hours): the event is there. */
const ALREADY_EXISTS = /already exists/i;

export class StripeSender {
  readonly #client: Stripe;

  constructor(
    private readonly settings: StripeSettings,
    timeoutMs: number,
  ) {
    const url = new URL(settings.baseUrl);
    this.#client = new Stripe(settings.apiKey.reveal(), {
      host: url.hostname,
      port: url.port || (url.protocol === 'http:' ? 80 : 443),
      protocol: url.protocol === 'http:' ? 'http' : 'https',
      maxNetworkRetries: 0,
      timeout: timeoutMs,
      // No telemetry headers, and no telemetry id file written in the user's home directory.
      telemetry: false,
    });
  }

  async send(item: ClaimedItem): Promise<Outcome> {
    const identifier = meterEventIdentifier(item.link_id, item.at, item.seq!);
    try {
      await this.#client.billing.meterEvents.create({
        event_name: this.settings.eventName,
        identifier,
        timestamp: Math.floor(item.at.getTime() / 1000) + 59,
        payload: { stripe_customer_id: item.customer!, value: item.micros! },
      });
      return { kind: 'sent' };
    } catch (err) {
      return this.outcomeOf(err, identifier);
    }
  }

  private outcomeOf(err: unknown, identifier: string): Outcome {
    const e = err as { statusCode?: number; message?: string; headers?: Record<string, string> };
    // Stripe's messages never carry the secret key whole; masked here all the same.
    const message = (e.message ?? String(err)).replaceAll(this.settings.apiKey.reveal(), '***').slice(0, 500);
    const status = e.statusCode;
    if (status === undefined || status >= 500) return { kind: 'retry', error: `Stripe: ${message}` };
    if (status === 429) {
      const after = Number(e.headers?.['retry-after']);
      return {
        kind: 'retry',
        error: `Stripe 429: ${message}`,
        ...(Number.isFinite(after) && after >= 0 ? { retryAfterMs: after * 1000 } : {}),
      };
    }
    if (status === 400 && ALREADY_EXISTS.test(message) && message.includes(identifier)) return { kind: 'sent' };
    return { kind: 'failed', error: `Stripe ${status}: ${message}` };
  }
}
