import { createHmac } from 'node:crypto';
import { webhookBody } from '../alert.js';
import { postJson } from './http.js';
import type { ChannelSender } from './types.js';

/** `Meter-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">` (CONTRACT §6). */
export function signWebhook(secret: string, body: string, unixSeconds: number): string {
  const v1 = createHmac('sha256', secret).update(`${unixSeconds}.${body}`).digest('hex');
  return `t=${unixSeconds},v1=${v1}`;
}

/** Generic webhook: the contract's JSON body, signed; Meter-Event-Id is the alert's id, the same
 *  on every retry, so receivers can drop duplicates. */
export const sendWebhook: ChannelSender = (channel, alert, opts) => {
  if (!channel.secret) return Promise.resolve({ ok: false, error: 'webhook channel has no signing secret' });
  const body = webhookBody(alert);
  const t = Math.floor((opts.now?.() ?? new Date()).getTime() / 1000);
  return postJson(
    channel.target,
    body,
    {
      'meter-event-id': alert.id,
      'meter-signature': signWebhook(channel.secret, body, t),
    },
    opts.timeoutMs,
  );
};
