/**
 * Exactly once through a kill -9, with sidecars as shipped (`meter start` processes on one
 * PostgreSQL): a sidecar is killed while Stripe holds its request (Stripe then takes the event
 * it never heard acknowledged), two more take over when its lease ends, and every micro-dollar
 * arrives once: each identifier once, the values adding up to the marked-up cost rounded once.
 */
import { expect, it } from 'vitest';
import { createLink } from '../../src/billing/links.js';
import { migrate } from '../../src/store/migrate.js';
import { openPostgres } from '../../src/store/postgres.js';
import { atFileEnd } from '../helpers/cleanup.js';
import { eventually, spawnSidecars } from '../helpers/fleet.js';
import { scrape } from '../helpers/prom-text.js';
import { createTestDatabase, postgresUrl } from '../helpers/stores.js';
import { startFakeUpstream } from '../helpers/upstreams.js';
import { startFakeStripe } from './fake-stripe.js';
import { accountId, minuteAgo, seed } from './helpers.js';

it.skipIf(!postgresUrl)(
  'a kill -9 mid-send resends nothing acknowledged; two sidecars never both send',
  { timeout: 180_000 },
  async () => {
    const url = await createTestDatabase();
    const db = openPostgres(url);
    atFileEnd(() => db.close());
    await migrate(db);
    const acme = await accountId(db, 'acme');
    const link = await createLink(db, {
      account: 'acme',
      tag: { key: 'tenant', value: 'globex' },
      target: 'stripe',
      customer: 'cus_Globex1',
      markupPct: '20',
    });
    await db.query(`UPDATE billing_links SET created_at = now() - interval '2 hours' WHERE id = $1`, [link.id]);
    // 30 minutes of a tenant's usage, in this month (the test keeps to one month's carry).
    const minutes = Array.from({ length: 30 }, (_, i) => minuteAgo(40 - i)).filter(
      (m) => new Date(m).getUTCMonth() === new Date().getUTCMonth(),
    );
    await seed(
      db,
      acme,
      minutes.map((m) => ({ at: m + 12_000, cost: '0.00012345', tags: { tenant: 'globex' } })),
    );

    const stripe = await startFakeStripe();
    let release!: () => void;
    stripe.plan({ hold: new Promise<void>((r) => (release = r)) });
    const upstream = await startFakeUpstream();
    const env = {
      METER_STRIPE_API_KEY: stripe.key,
      METER_STRIPE_BASE_URL: stripe.url,
      METER_BILLING_INTERVAL_MS: '200',
      METER_BILLING_SETTLE_MS: '0',
      METER_BILLING_LEASE_MS: '1500',
    };
    const [first] = await spawnSidecars(1, url, upstream, env);
    // Its first meter event is held at Stripe: kill -9 mid-send.
    await eventually(async () => stripe.requests.length === 1, 30_000, 'the first meter event reached Stripe');
    expect(await first!.stop('SIGKILL')).toBeNull();
    // Stripe takes the event after all: acknowledged to nobody.
    release();
    await eventually(async () => stripe.accepted.length === 1, 5_000, 'Stripe took the held event');

    const others = await spawnSidecars(2, url, upstream, env);
    await eventually(
      async () => {
        const [row] = await db.query<{ pending: string }>(
          `SELECT count(*)::text AS pending FROM billing_items WHERE link_id = $1 AND status <> 'sent'`,
          [link.id],
        );
        return stripe.accepted.length === minutes.length && row!.pending === '0';
      },
      60_000,
      'every minute sent and recorded',
    );

    // Each minute once (the fake refuses a second event with an identifier); the held one was
    // resent once by a survivor and answered "already exists", which counts as sent.
    const ids = stripe.accepted.map((e) => e.identifier);
    expect(new Set(ids).size).toBe(minutes.length);
    expect(stripe.requests.length).toBe(minutes.length + 1);
    // n × 0.00012345 × 1.2 = n × 148.14 µ$, rounded once for the month.
    const exact = BigInt(minutes.length) * 14_814n; // in hundredths of a micro-dollar
    expect(stripe.totals().get('cus_Globex1')).toBe((exact + 50n) / 100n);

    // /metrics: per link, nothing pending beyond the carried fraction, nothing failed.
    const m = await scrape(`${others[0]!.url}/metrics`);
    expect(m.value('meter_billing_failed_items', { link: link.id })).toBe(0);
    expect(m.value('meter_billing_sent_usd', { link: link.id })).toBeCloseTo(Number((exact + 50n) / 100n) / 1e6, 9);
    expect(m.text).not.toContain('globex');
    // The secret key: in no log line and nowhere in the database's billing tables.
    for (const d of [first!, ...others]) expect(d.stderr()).not.toContain(stripe.key);
    for (const table of ['billing_links', 'billing_items', 'billing_carry']) {
      const rows = await db.query<{ t: string }>(`SELECT row_to_json(x)::text AS t FROM ${table} x`);
      expect(rows.some((r) => r.t.includes(stripe.key))).toBe(false);
    }
  },
);
