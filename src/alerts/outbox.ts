import type { Queryable } from '../store/types.js';
import type { AlertChannel, BudgetAlert, ChannelKind } from './alert.js';
import type { DeliveryResult } from './channels/index.js';

export interface ClaimedDelivery {
  id: string;
  attempts: number;
  alert: BudgetAlert;
  channel: AlertChannel;
}

/**
 * Claims due deliveries: each is leased by moving next_attempt_at `leaseMs` ahead, so a sidecar
 * that dies mid-send leaves it due again. SKIP LOCKED lets sidecars on one PostgreSQL claim
 * different rows (the embedded store has one process and one connection). Only a channel's
 * oldest pending delivery is due, so each channel gets its alerts in the order they fired.
 */
export async function claimDueDeliveries(db: Queryable, limit: number, leaseMs: number): Promise<ClaimedDelivery[]> {
  const rows = await db.query<{
    id: string;
    attempts: number;
    payload: BudgetAlert;
    channel_id: string;
    kind: ChannelKind;
    target: string;
    secret: string | null;
  }>(
    `WITH due AS (
       SELECT d.id FROM alert_deliveries d
        WHERE d.status = 'pending' AND d.next_attempt_at <= now()
          AND NOT EXISTS (SELECT 1 FROM alert_deliveries o
                           WHERE o.channel_id = d.channel_id AND o.status = 'pending' AND o.id < d.id)
        ORDER BY d.next_attempt_at, d.id
        LIMIT $1
        FOR UPDATE OF d SKIP LOCKED
     )
     UPDATE alert_deliveries d
        SET attempts = d.attempts + 1, next_attempt_at = now() + $2::bigint * interval '1 millisecond'
       FROM due, alert_channels c
      WHERE d.id = due.id AND c.id = d.channel_id
     RETURNING d.id, d.attempts, d.payload, c.id AS channel_id, c.kind, c.target, c.secret`,
    [limit, leaseMs],
  );
  return rows
    .map((r) => ({
      id: r.id,
      attempts: r.attempts,
      alert: typeof r.payload === 'string' ? (JSON.parse(r.payload) as BudgetAlert) : r.payload,
      channel: { id: r.channel_id, kind: r.kind, target: r.target, secret: r.secret },
    }))
    .sort((a, b) => Number(BigInt(a.id) - BigInt(b.id)));
}

/** One line for alert_channels.last_detail and `alerts list`. */
export function resultDetail(kind: ChannelKind, r: DeliveryResult): string {
  if (!r.ok) return r.error ?? 'failed';
  const proto = kind === 'email' ? 'SMTP' : 'HTTP';
  return r.statusCode === undefined ? 'delivered' : `${proto} ${r.statusCode}`;
}

export type DeliveryStatus = 'delivered' | 'pending' | 'failed';

/**
 * Records one attempt in the delivery log and settles the delivery in one statement: delivered,
 * pending again after `retryInMs`, or failed when that retry would come after the give-up time.
 * The channel's last status follows. Returns the delivery's new status (undefined if the
 * delivery is gone, e.g. its channel was removed meanwhile).
 */
export async function recordDeliveryAttempt(
  db: Queryable,
  d: ClaimedDelivery,
  r: DeliveryResult,
  retryInMs: number,
  giveUpAfterMs: number,
): Promise<DeliveryStatus | undefined> {
  const [row] = await db.query<{ status: DeliveryStatus }>(
    `WITH upd AS (
       UPDATE alert_deliveries SET
         status = CASE WHEN $3::boolean THEN 'delivered'
                       WHEN created_at + $8::bigint * interval '1 millisecond'
                            < now() + $7::bigint * interval '1 millisecond' THEN 'failed'
                       ELSE 'pending' END,
         next_attempt_at = now() + $7::bigint * interval '1 millisecond',
         delivered_at = CASE WHEN $3::boolean THEN now() END,
         last_error = $5::text
        WHERE id = $1::bigint AND status = 'pending'
       RETURNING status
     ), attempt AS (
       INSERT INTO alert_delivery_attempts (delivery_id, channel_id, ok, status_code, error, duration_ms)
       SELECT id, channel_id, $3::boolean, $4::int, $5::text, $6::double precision FROM alert_deliveries WHERE id = $1::bigint
       RETURNING 1
     ), channel AS (
       UPDATE alert_channels SET
         last_status = CASE (SELECT status FROM upd) WHEN 'pending' THEN 'retrying' ELSE (SELECT status FROM upd) END,
         last_detail = $9::text, last_attempt_at = now()
        WHERE id = $2::text AND EXISTS (SELECT 1 FROM upd)
       RETURNING 1
     )
     SELECT status FROM upd`,
    [
      d.id,
      d.channel.id,
      r.ok,
      r.statusCode ?? null,
      r.ok ? null : (r.error ?? 'failed'),
      r.durationMs,
      retryInMs,
      giveUpAfterMs,
      resultDetail(d.channel.kind, r),
    ],
  );
  return row?.status;
}
