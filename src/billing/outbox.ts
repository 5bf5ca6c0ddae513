/**
 * Billing items on their way out: claimed with a lease (next_attempt_at moved ahead) so two
 * sidecars never send one at once and one that dies mid-send leaves it due again; settled only
 * after the receiver answered. An item is `sent` once the receiver acknowledged it, so nothing
 * acknowledged and recorded is ever sent again.
 */
import type { Queryable } from '../store/types.js';
import type { BillingTarget } from './links.js';

export interface ClaimedItem {
  id: string;
  link_id: string;
  target: BillingTarget;
  account: string;
  tag_value: string | null;
  customer: string | null;
  url: string | null;
  subject: string | null;
  at: Date;
  seq: number | null;
  event_id: string | null;
  cost: string;
  billed: string;
  micros: string | null;
  data: Record<string, unknown> | null;
  attempts: number;
}

/** Claims up to `limit` due items of the given targets for `leaseMs`. */
export async function claimDueItems(
  db: Queryable,
  targets: readonly BillingTarget[],
  limit: number,
  leaseMs: number,
): Promise<ClaimedItem[]> {
  if (targets.length === 0) return [];
  const rows = await db.query<Omit<ClaimedItem, 'at' | 'data'> & { at: Date | string; data: unknown }>(
    `WITH due AS (
       SELECT i.id FROM billing_items i JOIN billing_links l ON l.id = i.link_id
        WHERE i.status = 'pending' AND i.next_attempt_at <= now() AND l.target = ANY($1::text[])
        ORDER BY i.next_attempt_at, i.id
        LIMIT $2
        FOR UPDATE OF i SKIP LOCKED
     )
     UPDATE billing_items i
        SET attempts = i.attempts + 1, next_attempt_at = now() + $3::bigint * interval '1 millisecond'
       FROM due, billing_links l, accounts a
      WHERE i.id = due.id AND l.id = i.link_id AND a.id = l.account_id
     RETURNING i.id::text AS id, i.link_id, l.target, a.name AS account, l.tag_value, l.customer, l.url, l.subject,
               i.at, i.seq, i.event_id, i.cost::text AS cost, i.billed::text AS billed, i.micros::text AS micros,
               i.data, i.attempts`,
    [targets, limit, leaseMs],
  );
  return rows
    .map((r) => ({
      ...r,
      at: r.at instanceof Date ? r.at : new Date(r.at),
      data: (typeof r.data === 'string' ? JSON.parse(r.data) : r.data) as ClaimedItem['data'],
    }))
    .sort((a, b) => Number(BigInt(a.id) - BigInt(b.id)));
}

/** What a receiver's answer means for the items it was about. */
export type Outcome =
  | { kind: 'sent' }
  | { kind: 'retry'; error: string; retryAfterMs?: number }
  | { kind: 'failed'; error: string }
  | { kind: 'expired'; error: string };

/**
 * Settles items of one link after an attempt: sent, due again after `retryInMs`, failed or
 * expired. Only items still pending change (another sidecar whose lease ran out may have settled
 * them meanwhile). The link keeps its last error, cleared by the next success.
 */
export async function settleItems(
  db: Queryable,
  linkId: string,
  ids: readonly string[],
  outcome: Outcome,
  retryInMs = 0,
): Promise<void> {
  const status = outcome.kind === 'retry' ? 'pending' : outcome.kind;
  const error = outcome.kind === 'sent' ? null : outcome.error;
  await db.query(
    `WITH upd AS (
       UPDATE billing_items SET
         status = $3,
         sent_at = CASE WHEN $3 = 'sent' THEN now() END,
         last_error = $4::text,
         next_attempt_at = now() + $5::bigint * interval '1 millisecond'
        WHERE id = ANY($2::bigint[]) AND status = 'pending'
       RETURNING 1
     )
     UPDATE billing_links SET
       last_error = $4::text,
       last_error_at = CASE WHEN $4::text IS NULL THEN NULL ELSE now() END
      WHERE id = $1 AND (SELECT count(*) FROM upd) > 0`,
    [linkId, ids, status, error, Math.max(0, Math.round(retryInMs))],
  );
}
