import { showBudget } from './admin.js';
import { unknownAccount } from '../auth/accounts.js';
import { composeAlert } from './compose-alert.js';
import { currentMonth } from '../calendar.js';
import type { Queryable } from '../store/types.js';
import type { AlertChannel } from '../alerts/alert.js';
import { sendToChannel, type DeliveryResult, type SendOptions } from '../alerts/channels/index.js';
import { resultDetail } from '../alerts/outbox.js';

export interface TestSendResult {
  channel: Pick<AlertChannel, 'id' | 'kind'>;
  result: DeliveryResult;
  detail: string;
}

/**
 * `meter alerts test`: sends a `budget.test` message with the account's real figures through
 * every channel of the account now (not through the outbox, no retries), records each attempt
 * in the delivery log and as the channel's last status, and returns the results.
 */
export async function sendTestAlerts(db: Queryable, account: string, opts: SendOptions): Promise<TestSendResult[]> {
  const now = opts.now?.() ?? new Date();
  const channels = await db.query<AlertChannel & { account_id: string }>(
    `SELECT c.id, c.kind, c.target, c.secret, a.id AS account_id
       FROM accounts a LEFT JOIN alert_channels c ON c.account_id = a.id
      WHERE a.name = $1 ORDER BY c.created_at, c.id`,
    [account],
  );
  if (channels.length === 0) throw unknownAccount(account);
  const live = channels.filter((c) => c.id !== null);
  if (live.length === 0) return [];
  const view = await showBudget(db, account, now);
  const alert = await composeAlert(db, {
    type: 'budget.test',
    accountId: channels[0]!.account_id,
    account,
    window: currentMonth(now),
    level: null,
    spend: view.spend,
    budget: view.budget,
    createdAt: now,
  });
  return Promise.all(
    live.map(async (channel) => {
      const result = await sendToChannel(channel, alert, opts);
      const detail = resultDetail(channel.kind, result);
      await db.query(
        `WITH attempt AS (
         INSERT INTO alert_delivery_attempts (delivery_id, channel_id, ok, status_code, error, duration_ms)
         VALUES (NULL, $1, $2::boolean, $3::int, $4::text, $5::double precision)
       )
       UPDATE alert_channels SET last_status = CASE WHEN $2::boolean THEN 'delivered' ELSE 'failed' END,
              last_detail = $6::text, last_attempt_at = now()
        WHERE id = $1`,
        [
          channel.id,
          result.ok,
          result.statusCode ?? null,
          result.ok ? null : (result.error ?? 'failed'),
          result.durationMs,
          detail,
        ],
      );
      return { channel: { id: channel.id, kind: channel.kind }, result, detail };
    }),
  );
}
