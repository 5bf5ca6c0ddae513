/** Shared set-up of the billing tests: an account, events of its tenants, a sender on a store. */
import { Writable } from 'node:stream';
import pino from 'pino';
import { BillingSender, type BillingOptions } from '../../src/billing/sender.js';
import { createLink, type LinkSpec, type LinkView } from '../../src/billing/links.js';
import { Secret } from '../../src/secret.js';
import type { Db } from '../../src/store/types.js';
import { makeEvent, seedEvents } from '../analytics/helpers/seed.js';
import type { UsageEvent } from '../../src/metering/event.js';

export const FAST: BillingOptions = {
  intervalMs: 60_000,
  derive: { settleMs: 0, lookbackMs: 60_000, batch: 5_000 },
  leaseMs: 3_000,
  batchSize: 100,
  retry: { firstRetryMs: 50, maxDelayMs: 200 },
};

/** A sender as a sidecar runs it, its log kept as text (to look for secrets in it). */
export function sender(db: Db, stripe?: { url: string; key: string }, opts: Partial<BillingOptions> = {}) {
  let log = '';
  const logger = pino(
    { level: 'debug' },
    new Writable({
      write(chunk: Buffer, _enc, done) {
        log += chunk.toString('utf8');
        done();
      },
    }),
  );
  const s = new BillingSender(
    db,
    logger,
    {
      stripeApiKey: stripe ? new Secret(stripe.key) : undefined,
      stripeBaseUrl: stripe?.url ?? 'https://api.stripe.com',
      stripeEventName: 'llm_cost',
    },
    { ...FAST, ...opts },
  );
  return { sender: s, log: () => log };
}

export async function accountId(db: Db, name: string): Promise<string> {
  const [row] = await db.query<{ id: string }>('INSERT INTO accounts (name, plan) VALUES ($1, $2) RETURNING id', [
    name,
    'pro',
  ]);
  return row!.id;
}

/** A link whose usage counts from `sinceMs` ago (a link bills usage from when it was made). */
export async function linkSince(db: Db, spec: LinkSpec, sinceMs = 60 * 86_400_000): Promise<LinkView> {
  const link = await createLink(db, spec);
  await db.query(`UPDATE billing_links SET created_at = now() - $2::bigint * interval '1 millisecond' WHERE id = $1`, [
    link.id,
    sinceMs,
  ]);
  return link;
}

/** The start of the UTC minute `minutesAgo` minutes before now. */
export const minuteAgo = (minutesAgo: number): number => Math.floor(Date.now() / 60_000) * 60_000 - minutesAgo * 60_000;

export async function seed(
  db: Db,
  account: string,
  rows: { at: number; cost: string; tags?: Record<string, string> }[],
): Promise<UsageEvent[]> {
  const events = rows.map((r) =>
    makeEvent({ accountId: account, time: new Date(r.at).toISOString(), cost: r.cost, tags: r.tags ?? {} }),
  );
  await seedEvents(db, events);
  return events;
}

/** Runs passes until `done` holds (retries wait for their backoff). */
export async function passUntil(s: BillingSender, done: () => boolean | Promise<boolean>, ms = 8_000): Promise<void> {
  const t0 = Date.now();
  for (;;) {
    await s.pass();
    if (await done()) return;
    if (Date.now() - t0 > ms) throw new Error(`billing: not done within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 40));
  }
}
