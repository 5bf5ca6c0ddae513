import { randomBytes } from 'node:crypto';
import { requireAccount, unknownAccount } from '../auth/accounts.js';
import { MeterError } from '../errors.js';
import type { Queryable } from '../store/types.js';
import type { ChannelKind } from './alert.js';

/** What `meter alerts add|list|remove` does to the store; each write is one statement. */

/** A bad channel or an unknown one: the CLI prints its message as is. */
class AlertAdminError extends MeterError {
  override name = 'AlertAdminError';
}

const EMAIL_RE =
  /^[^\s@<>(),;:"\\[\]]+@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*$/;
const MIN_SECRET = 16;

/** Checks a channel target; returns it trimmed or throws a one-line error naming the flag. */
export function validateTarget(kind: ChannelKind, value: string): string {
  const v = value.trim();
  if (kind === 'email') {
    if (!EMAIL_RE.test(v))
      throw new AlertAdminError(`--email "${v}" is not an e-mail address (expected name@example.com)`);
    return v;
  }
  let url: URL | undefined;
  try {
    url = new URL(v);
  } catch {
    /* reported below */
  }
  if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:')) {
    throw new AlertAdminError(`--${kind} "${v}" is not a valid URL (expected an http:// or https:// address)`);
  }
  return v;
}

export function validateSecret(secret: string): string {
  if (secret.length < MIN_SECRET || /\s/.test(secret)) {
    throw new AlertAdminError(`--secret must be at least ${MIN_SECRET} characters without spaces`);
  }
  return secret;
}

/** How a target is shown: Slack and Teams webhook addresses are credentials themselves (anyone
 *  holding one can post), so only their host and first path segment are shown; query strings
 *  (tokens) never are. */
export function displayTarget(kind: ChannelKind, target: string): string {
  if (kind === 'email') return target;
  try {
    const url = new URL(target);
    const segments = url.pathname.split('/').filter(Boolean);
    const keep = kind === 'webhook' ? segments : segments.slice(0, 1);
    const path = keep.length ? `/${keep.join('/')}` : '';
    const more = keep.length < segments.length ? '/…' : '';
    return `${url.origin}${path}${more}${url.search ? '?…' : ''}`;
  } catch {
    return '(invalid URL)';
  }
}

export interface AddedChannel {
  id: string;
  account: string;
  kind: ChannelKind;
  target: string;
  created_at: string;
  /** Only when meter generated the webhook's signing secret: shown once, at creation. */
  secret?: string;
}

export async function addChannel(
  db: Queryable,
  account: string,
  kind: ChannelKind,
  target: string,
  secret?: string,
): Promise<AddedChannel> {
  const generated =
    kind === 'webhook' && secret === undefined ? `whsec_${randomBytes(24).toString('base64url')}` : undefined;
  const id = randomBytes(6).toString('hex');
  const [row] = await db.query<{ created_at: Date | string }>(
    `INSERT INTO alert_channels (id, account_id, kind, target, secret)
     SELECT $1, id, $3, $4, $5 FROM accounts WHERE name = $2
     RETURNING created_at`,
    [id, account, kind, target, kind === 'webhook' ? (secret ?? generated) : null],
  );
  if (!row) throw unknownAccount(account);
  return { id, account, kind, target, created_at: iso(row.created_at), ...(generated ? { secret: generated } : {}) };
}

export interface ChannelListing {
  id: string;
  account: string;
  kind: ChannelKind;
  target: string;
  created_at: string;
  last_status: 'delivered' | 'retrying' | 'failed' | null;
  last_detail: string | null;
  last_attempt_at: string | null;
}

/** Channels with their last delivery status; never the webhook secrets. */
export async function listChannels(db: Queryable, account?: string): Promise<ChannelListing[]> {
  const rows = await db.query<{
    id: string;
    account: string;
    kind: ChannelKind;
    target: string;
    created_at: Date | string;
    last_status: ChannelListing['last_status'];
    last_detail: string | null;
    last_attempt_at: Date | string | null;
  }>(
    `SELECT c.id, a.name AS account, c.kind, c.target, c.created_at, c.last_status, c.last_detail, c.last_attempt_at
       FROM alert_channels c JOIN accounts a ON a.id = c.account_id
      WHERE $1::text IS NULL OR a.name = $1::text
      ORDER BY a.name, c.created_at, c.id`,
    [account ?? null],
  );
  if (rows.length === 0 && account !== undefined) await requireAccount(db, account);
  return rows.map((r) => ({
    id: r.id,
    account: r.account,
    kind: r.kind,
    target: displayTarget(r.kind, r.target),
    created_at: iso(r.created_at),
    last_status: r.last_status,
    last_detail: r.last_detail,
    last_attempt_at: r.last_attempt_at === null ? null : iso(r.last_attempt_at),
  }));
}

/** Removes a channel (its queued deliveries and log go with it). */
export async function removeChannel(db: Queryable, id: string): Promise<{ account: string; kind: ChannelKind }> {
  const [row] = await db.query<{ account: string; kind: ChannelKind }>(
    `WITH gone AS (DELETE FROM alert_channels WHERE id = $1 RETURNING account_id, kind)
     SELECT a.name AS account, gone.kind FROM gone JOIN accounts a ON a.id = gone.account_id`,
    [id],
  );
  if (!row) throw new AlertAdminError(`no alert channel with id "${id}" (see \`meter alerts list\`)`);
  return row;
}

/** Timestamps arrive as Date (pg, PGlite) or ISO text (through the daemon's admin API). */
export const iso = (v: Date | string): string => (v instanceof Date ? v : new Date(v)).toISOString();
