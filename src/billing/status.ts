/**
 * `meter billing status`: per link and month, what was metered, billed (with the markup), sent
 * (acknowledged by the receiver), pending, expired and failed, so that invoiced = metered can be
 * checked at a glance. Money is exact decimal text here; the CLI prints it as JSON numbers.
 */
import { requireAccount } from '../auth/accounts.js';
import { BillingError } from './links.js';
import type { Queryable } from '../store/types.js';
import { BILLED_SCALE, formatBilled, formatMicros, formatScaled, toScaled } from './amounts.js';
import { linkFields, type LinkRow, type LinkView } from './links.js';

export interface FailedItem {
  id: string;
  /** The Stripe minute, or the call's time (CloudEvents). */
  time: string;
  usd: string;
  error: string | null;
}

/** A link's month, as `billing status --json` prints it. */
export interface LinkStatus extends Omit<LinkView, 'created_at'> {
  month: string;
  metered_usd: string;
  billed_usd: string;
  sent_usd: string;
  pending_usd: string;
  expired_usd: string;
  failed: FailedItem[];
  last_error: string | null;
}

/** At most this many failed items are listed per link (the rest are in pending_usd all the same). */
const MAX_FAILED_LISTED = 100;

interface Row extends Omit<LinkRow, 'created_at'> {
  last_error: string | null;
  metered: string;
  billed: string;
  sent_micros: string;
  sent_billed: string;
  expired_micros: string;
  expired_billed: string;
}

const billedUnits = (text: string) => toScaled(text, BILLED_SCALE) ?? 0n;

/** The sums a link's figures come from, over `billing_items i`. */
const SUMS = `coalesce(sum(i.cost), 0)::text AS metered,
  coalesce(sum(i.billed), 0)::text AS billed,
  coalesce(sum(i.micros) FILTER (WHERE i.status = 'sent'), 0)::text AS sent_micros,
  coalesce(sum(i.billed) FILTER (WHERE i.status = 'sent'), 0)::text AS sent_billed,
  coalesce(sum(i.micros) FILTER (WHERE i.status = 'expired'), 0)::text AS expired_micros,
  coalesce(sum(i.billed) FILTER (WHERE i.status = 'expired'), 0)::text AS expired_billed`;

type Sums = Pick<Row, 'target' | 'billed' | 'sent_micros' | 'sent_billed' | 'expired_micros' | 'expired_billed'>;

/** Billed, sent, expired and pending in units of 1e-14 USD. Stripe: what was sent is the
 *  micro-dollars it acknowledged; CloudEvents: each call's billed amount. pending = billed − sent
 *  − expired, so it holds the carried fraction of a micro-dollar too. */
function figures(r: Sums): { billed: bigint; sent: bigint; expired: bigint; pending: bigint } {
  const stripe = r.target === 'stripe';
  const sent = stripe ? BigInt(r.sent_micros) * 10n ** 8n : billedUnits(r.sent_billed);
  const expired = stripe ? BigInt(r.expired_micros) * 10n ** 8n : billedUnits(r.expired_billed);
  const billed = billedUnits(r.billed);
  return { billed, sent, expired, pending: billed - sent - expired };
}

/** The links in force (and unlinked ones with items in the month), each with its month's figures. */
export async function billingStatus(db: Queryable, month: string, account?: string): Promise<LinkStatus[]> {
  if (!/^\d{4}-(0[1-9]|1[0-2])$/.test(month)) throw new BillingError(`--month "${month}" is not YYYY-MM`);
  const rows = await db.query<Row>(
    `SELECT l.id, a.name AS account, l.tag_key, l.tag_value, l.target, l.customer, l.url, l.subject,
            l.markup_pct::text AS markup_pct, l.last_error,
            ${SUMS}
       FROM billing_links l
       JOIN accounts a ON a.id = l.account_id
       LEFT JOIN billing_items i ON i.link_id = l.id AND i.month = $1
      WHERE ($2::text IS NULL OR a.name = $2::text)
      GROUP BY l.id, a.name
     HAVING bool_and(l.unlinked_at IS NULL) OR count(i.id) > 0
      ORDER BY min(l.created_at), l.id`,
    [month, account ?? null],
  );
  if (rows.length === 0 && account !== undefined) await requireAccount(db, account);
  const failed = await db.query<{
    id: string;
    link_id: string;
    at: Date | string;
    micros: string | null;
    billed: string;
    last_error: string | null;
  }>(
    `SELECT id::text AS id, link_id, at, micros::text AS micros, billed::text AS billed, last_error
       FROM (SELECT i.*, row_number() OVER (PARTITION BY i.link_id ORDER BY i.id) AS n
               FROM billing_items i WHERE i.status = 'failed' AND i.month = $1 AND i.link_id = ANY($2::text[])) f
      WHERE n <= $3 ORDER BY id`,
    [month, rows.map((r) => r.id), MAX_FAILED_LISTED],
  );
  return rows.map((r) => {
    const stripe = r.target === 'stripe';
    const { billed, sent, expired, pending } = figures(r);
    return {
      ...linkFields(r),
      month,
      metered_usd: formatScaled(toScaled(r.metered, 8) ?? 0n, 8),
      billed_usd: formatBilled(billed),
      sent_usd: formatBilled(sent),
      pending_usd: formatBilled(pending),
      expired_usd: formatBilled(expired),
      failed: failed
        .filter((f) => f.link_id === r.id)
        .map((f) => ({
          id: f.id,
          time: (f.at instanceof Date ? f.at : new Date(f.at)).toISOString(),
          usd: stripe ? formatMicros(BigInt(f.micros ?? '0')) : formatScaled(billedUnits(f.billed), BILLED_SCALE),
          error: f.last_error,
        })),
      last_error: r.last_error,
    };
  });
}

/** Per link, over all months: sent and pending USD and failed items (for /metrics). */
export async function billingTotals(
  db: Queryable,
): Promise<{ link: string; sent: number; pending: number; failed: number }[]> {
  const rows = await db.query<Sums & { id: string; failed: string }>(
    `SELECT l.id, l.target, ${SUMS}, count(i.id) FILTER (WHERE i.status = 'failed')::text AS failed
       FROM billing_links l JOIN billing_items i ON i.link_id = l.id
      GROUP BY l.id`,
  );
  return rows.map((r) => {
    const f = figures(r);
    const usd = (units: bigint) => Number(formatBilled(units));
    return { link: r.id, sent: usd(f.sent), pending: usd(f.pending), failed: Number(r.failed) };
  });
}
