/**
 * What `meter billing link|list|unlink` does to the store: billing links (CONTRACT §8). Each
 * write is one statement (CLI commands may run through a daemon's admin API).
 */
import { randomBytes } from 'node:crypto';
import { AdminError, requireAccount, unknownAccount } from '../auth/accounts.js';
import { maskUrl } from '../config.js';
import type { Queryable } from '../store/types.js';
import { formatScaled, toScaled } from './amounts.js';

export type BillingTarget = 'stripe' | 'cloudevents';

/** A user error: one line from the CLI, 400 through the admin API. */
export class BillingError extends AdminError {
  override name = 'BillingError';
}

export interface LinkSpec {
  account: string;
  /** One tag value (`tenant=globex`), or the whole account. */
  tag?: { key: string; value: string };
  target: BillingTarget;
  customer?: string;
  url?: string;
  subject?: string;
  /** Normalised decimal text (parseMarkupPct). */
  markupPct: string;
}

/** A link as `billing link --json` and `billing list --json` print it. */
export interface LinkView {
  id: string;
  account: string;
  tag: string | null;
  target: BillingTarget;
  customer?: string;
  url?: string;
  subject?: string;
  /** Decimal text; printed as a JSON number. */
  markup_pct: string;
  created_at: string;
}

const TAG_KEY = /^[A-Za-z0-9_.-]{1,64}$/;
const CUSTOMER = /^cus_[A-Za-z0-9]{1,64}$/;

/** `--tag k=v`: the key as in X-Metering-Tags, a value of 1–256 characters. */
export function parseTag(text: string): { key: string; value: string } {
  const at = text.indexOf('=');
  const key = at < 0 ? '' : text.slice(0, at);
  const value = at < 0 ? '' : text.slice(at + 1);
  if (!TAG_KEY.test(key) || value.length < 1 || value.length > 256) {
    throw new BillingError(
      `--tag "${text}" is invalid: expected key=value (key [A-Za-z0-9_.-]{1,64}, value 1–256 characters), e.g. tenant=globex`,
    );
  }
  return { key, value };
}

export function validateCustomer(id: string): string {
  if (!CUSTOMER.test(id)) throw new BillingError(`--stripe-customer "${id}" is not a Stripe customer id (cus_…)`);
  return id;
}

export function validateReceiverUrl(text: string): string {
  let url: URL | undefined;
  try {
    url = new URL(text.trim());
  } catch {
    /* reported below */
  }
  if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:') || text.length > 2048) {
    throw new BillingError(`--cloudevents-url "${maskUrl(text)}" is not an http:// or https:// address`);
  }
  return text.trim();
}

/** A link as read from the store, with its account's name. */
export interface LinkRow {
  id: string;
  account: string;
  tag_key: string | null;
  tag_value: string | null;
  target: BillingTarget;
  customer: string | null;
  url: string | null;
  subject: string | null;
  markup_pct: string;
  created_at: Date | string;
}

const iso = (v: Date | string): string => (v instanceof Date ? v : new Date(v)).toISOString();

/** The subject of a link's CloudEvents: `--subject`, else the tag value, else the account name. */
export const subjectOf = (r: Pick<LinkRow, 'subject' | 'tag_value' | 'account'>): string =>
  r.subject ?? r.tag_value ?? r.account;

/** A markup as stored (NUMERIC(10,4)) to plain text: "20.0000" → "20". */
export const markupText = (stored: string): string => formatScaled(toScaled(stored, 4) ?? 0n, 4);

/** What every listing shows of a link: where it sends, never a token of the receiver's address. */
export function linkFields(r: Omit<LinkRow, 'created_at'>): Omit<LinkView, 'created_at'> {
  const where = r.target === 'stripe' ? { customer: r.customer! } : { url: maskUrl(r.url!), subject: subjectOf(r) };
  return {
    id: r.id,
    account: r.account,
    tag: r.tag_key === null ? null : `${r.tag_key}=${r.tag_value}`,
    target: r.target,
    ...where,
    markup_pct: markupText(r.markup_pct),
  };
}

const view = (r: LinkRow): LinkView => ({ ...linkFields(r), created_at: iso(r.created_at) });

const LINK_COLUMNS = `l.id, a.name AS account, l.tag_key, l.tag_value, l.target, l.customer, l.url, l.subject,
  l.markup_pct::text AS markup_pct, l.created_at`;

export async function createLink(db: Queryable, spec: LinkSpec): Promise<LinkView> {
  const id = `bl${randomBytes(6).toString('hex')}`;
  const [row] = await db.query<LinkRow>(
    `WITH l AS (
       INSERT INTO billing_links (id, account_id, tag_key, tag_value, target, customer, url, subject, markup_pct)
       SELECT $1, a.id, $3, $4, $5, $6, $7, $8, $9::numeric FROM accounts a WHERE a.name = $2
       RETURNING *
     )
     SELECT ${LINK_COLUMNS} FROM l JOIN accounts a ON a.id = l.account_id`,
    [
      id,
      spec.account,
      spec.tag?.key ?? null,
      spec.tag?.value ?? null,
      spec.target,
      spec.customer ?? null,
      spec.url ?? null,
      spec.subject ?? null,
      spec.markupPct,
    ],
  );
  if (!row) throw unknownAccount(spec.account);
  return view(row);
}

/** Links in force (unlinked ones are gone from the list), oldest first. */
export async function listLinks(db: Queryable, account?: string): Promise<LinkView[]> {
  const rows = await db.query<LinkRow>(
    `SELECT ${LINK_COLUMNS} FROM billing_links l JOIN accounts a ON a.id = l.account_id
      WHERE l.unlinked_at IS NULL AND ($1::text IS NULL OR a.name = $1::text)
      ORDER BY l.created_at, l.id`,
    [account ?? null],
  );
  if (rows.length === 0 && account !== undefined) await requireAccount(db, account);
  return rows.map(view);
}

/** Stops billing new usage through a link; what was already recorded for it is still sent. */
export async function unlink(db: Queryable, id: string): Promise<LinkView> {
  const [row] = await db.query<LinkRow>(
    `WITH l AS (UPDATE billing_links SET unlinked_at = now() WHERE id = $1 AND unlinked_at IS NULL RETURNING *)
     SELECT ${LINK_COLUMNS} FROM l JOIN accounts a ON a.id = l.account_id`,
    [id],
  );
  if (!row) throw new BillingError(`no billing link with id "${id}" (see \`meter billing list\`)`);
  return view(row);
}
