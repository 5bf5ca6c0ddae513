import type { AlertChannel, BudgetAlert, ChannelKind } from '../alert.js';
import { sendEmail } from './email.js';
import { sendSlack } from './slack.js';
import { sendTeams } from './teams.js';
import type { ChannelSender, SendOptions, SendOutcome } from './types.js';
import { sendWebhook } from './webhook.js';

export type { SendOptions, SendOutcome } from './types.js';

const senders: Record<ChannelKind, ChannelSender> = {
  slack: sendSlack,
  teams: sendTeams,
  email: sendEmail,
  webhook: sendWebhook,
};

export interface DeliveryResult extends SendOutcome {
  durationMs: number;
}

/** Sends one alert to one channel; never throws, always says how long it took. */
export async function sendToChannel(
  channel: AlertChannel,
  alert: BudgetAlert,
  opts: SendOptions,
): Promise<DeliveryResult> {
  const started = performance.now();
  let outcome: SendOutcome;
  try {
    outcome = await senders[channel.kind](channel, alert, opts);
  } catch (err) {
    outcome = { ok: false, error: (err as Error).message };
  }
  return { ...outcome, durationMs: Math.round((performance.now() - started) * 100) / 100 };
}
