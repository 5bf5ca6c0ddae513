import type { AlertChannel, BudgetAlert } from '../alert.js';

export interface SendOptions {
  /** Longest a single attempt may take (connect, answer, body). */
  timeoutMs: number;
  /** METER_SMTP_URL, for e-mail channels. */
  smtpUrl?: string;
  /** Clock for the webhook signature's timestamp. */
  now?: () => Date;
}

export interface SendOutcome {
  ok: boolean;
  /** HTTP status, or the SMTP server's reply code. */
  statusCode?: number;
  /** Why it failed, one line; never contains a secret. */
  error?: string;
  /** The receiver's Retry-After, in seconds (HTTP 429 and 503). */
  retryAfterS?: number;
}

export type ChannelSender = (channel: AlertChannel, alert: BudgetAlert, opts: SendOptions) => Promise<SendOutcome>;
