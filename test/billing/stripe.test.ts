/**
 * Stripe meter events from stored usage, against a fake Stripe that enforces what Stripe
 * documents: one event per link and minute with usage, whole micro-dollars with the rounding
 * remainder carried forward, deterministic identifiers, late usage as a further event of its
 * minute, the 35-day window, retries on 429 (Retry-After) and 5xx, a refusal recorded as failed,
 * "already exists" as sent; on every store.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/store/types.js';
import { billingStatus } from '../../src/billing/status.js';
import { meterEventIdentifier } from '../../src/billing/stripe.js';
import { describeEachBackend, timescaleBackend } from '../helpers/stores.js';
import { startFakeStripe } from './fake-stripe.js';
import { accountId, linkSince, minuteAgo, passUntil, seed, sender } from './helpers.js';

const month = (ms: number) => new Date(ms).toISOString().slice(0, 7);

/** Minutes, markup, carry, late usage and a second run: what reaches Stripe, and status. */
async function sendsEachMinuteOnce(db: Db): Promise<void> {
  const stripe = await startFakeStripe();
  const acct = await accountId(db, 'acme');
  const link = await linkSince(db, {
    account: 'acme',
    tag: { key: 'tenant', value: 'globex' },
    target: 'stripe',
    customer: 'cus_Globex1',
    markupPct: '20',
  });
  const a = minuteAgo(5);
  const b = minuteAgo(4);
  const globex = { tenant: 'globex' };
  await seed(db, acct, [
    { at: a + 1_000, cost: '0.00000123', tags: globex },
    { at: a + 2_000, cost: '0.00000123', tags: globex },
    { at: a + 59_999, cost: '0.00000123', tags: globex },
    { at: b + 30_000, cost: '0.0000015', tags: globex },
    { at: b + 31_000, cost: '0.5', tags: { tenant: 'initech' } }, // another tenant
    { at: b + 32_000, cost: '0.5' }, // untagged
    { at: b + 33_000, cost: '0', tags: globex }, // cost nothing: no usage to bill
  ]);
  const { sender: s, log } = sender(db, stripe);
  await passUntil(s, () => stripe.accepted.length === 2);

  // 3 × 0.00000123 × 1.2 = 4.428 µ$ → 4; then 6.228 → 6, so 2: the 0.428 is carried.
  expect(stripe.accepted.map((e) => [e.identifier, e.value, e.customer, e.timestamp, e.event_name])).toEqual([
    [meterEventIdentifier(link.id, new Date(a), 1), 4n, 'cus_Globex1', a / 1000 + 59, 'llm_cost'],
    [meterEventIdentifier(link.id, new Date(b), 1), 2n, 'cus_Globex1', b / 1000 + 59, 'llm_cost'],
  ]);
  const stamp = new Date(a).toISOString().slice(0, 16).replace(/[-T:]/g, '');
  expect(stripe.accepted[0]!.identifier).toBe(`meter_${link.id}_${stamp}_1`);
  expect(stripe.accepted[0]!.identifier.length).toBeLessThanOrEqual(100);
  // Form-encoded, with the key as a Bearer token (the fake refuses anything else).
  const form = new URLSearchParams(stripe.requests[0]!.body);
  expect(form.get('payload[stripe_customer_id]')).toBe('cus_Globex1');
  expect(stripe.requests[0]!.headers['content-type']).toBe('application/x-www-form-urlencoded');

  // A late event of minute A (a long call, a replayed spool): a second event of that minute.
  await seed(db, acct, [{ at: a + 10_000, cost: '0.00000042', tags: globex }]);
  await passUntil(s, () => stripe.accepted.length === 3);
  // 6.228 + 0.504 = 6.732 µ$ → 7: one more.
  expect(stripe.accepted[2]).toMatchObject({ identifier: meterEventIdentifier(link.id, new Date(a), 2), value: 1n });

  // Nothing is sent twice, however often the loop runs.
  await s.pass();
  await s.pass();
  expect(stripe.accepted).toHaveLength(3);
  expect(stripe.requests).toHaveLength(3);

  const [st] = await billingStatus(db, month(a), 'acme');
  expect(st).toMatchObject({
    id: link.id,
    target: 'stripe',
    customer: 'cus_Globex1',
    tag: 'tenant=globex',
    markup_pct: '20',
    metered_usd: '0.00000561',
    billed_usd: '0.000006732',
    sent_usd: '0.000007',
    pending_usd: '-0.000000268',
    expired_usd: '0',
    failed: [],
    last_error: null,
  });
  expect(log()).not.toContain(stripe.key);
}

describeEachBackend('billing to Stripe', (backend) => {
  let db: Db;
  beforeAll(async () => {
    db = await backend.open();
  });

  it('sends one event per minute with usage, micro-dollars carried forward, late usage as <n>+1, exactly once', () =>
    sendsEachMinuteOnce(db));

  it('retries 429 after Retry-After and 5xx with backoff; "already exists" is sent; a refusal is failed with its message', async () => {
    const stripe = await startFakeStripe();
    const acct = await accountId(db, 'initrode');
    const link = await linkSince(db, { account: 'initrode', target: 'stripe', customer: 'cus_Acme1', markupPct: '0' });
    const minutes = [minuteAgo(9), minuteAgo(8), minuteAgo(7)];
    await seed(
      db,
      acct,
      minutes.map((m) => ({ at: m + 5_000, cost: '0.000002' })),
    );
    // First event: 429 for 1 s; then a 503; then accepted but the answer never arrives.
    stripe.plan({ status: 429, retryAfterS: 1 }, { status: 503 }, { cutAfterAccept: true });
    const { sender: s } = sender(db, stripe);
    const t0 = Date.now();
    await passUntil(s, () => stripe.accepted.length === 3, 10_000);
    // Retry-After held the link's items back for its second.
    expect(Date.now() - t0).toBeGreaterThanOrEqual(1_000);
    await passUntil(s, async () => (await billingStatus(db, month(minutes[0]!), 'initrode'))[0]!.pending_usd === '0');
    // The cut answer was retried; Stripe said the identifier exists: sent, not billed twice.
    const dup = stripe.requests.filter((r) => r.body.includes(encodeURIComponent(stripe.accepted[0]!.identifier)));
    expect(stripe.accepted.map((e) => e.value)).toEqual([2n, 2n, 2n]);
    expect(new Set(stripe.accepted.map((e) => e.identifier)).size).toBe(3);
    expect(dup.length).toBeGreaterThanOrEqual(2);

    // A refusal (an unknown customer): failed with Stripe's message, in status, never retried.
    await seed(db, acct, [{ at: minuteAgo(6) + 1_000, cost: '0.000003' }]);
    stripe.plan({ status: 400, message: "No such customer: 'cus_Acme1'" });
    await passUntil(s, async () => (await billingStatus(db, month(minuteAgo(6)), 'initrode'))[0]!.failed.length === 1);
    const [st] = await billingStatus(db, month(minuteAgo(6)), 'initrode');
    expect(st!.failed[0]).toMatchObject({ usd: '0.000003', error: "Stripe 400: No such customer: 'cus_Acme1'" });
    expect(st!.last_error).toBe("Stripe 400: No such customer: 'cus_Acme1'");
    const requests = stripe.requests.length;
    await s.pass();
    expect(stripe.requests.length).toBe(requests);
    expect(link.id).toBe(st!.id);
  });

  it('marks usage older than Stripe accepts (35 days) expired and sends what is within the window', async () => {
    const stripe = await startFakeStripe();
    const acct = await accountId(db, 'hooli');
    await linkSince(db, { account: 'hooli', target: 'stripe', customer: 'cus_Acme1', markupPct: '0' });
    const old = minuteAgo(40 * 1_440);
    const recent = minuteAgo(30 * 1_440);
    await seed(db, acct, [
      { at: old + 1_000, cost: '0.01' },
      { at: recent + 1_000, cost: '0.02' },
    ]);
    const { sender: s } = sender(db, stripe);
    await passUntil(s, () => stripe.accepted.length === 1);
    await s.pass();
    expect(stripe.accepted).toHaveLength(1);
    expect(stripe.accepted[0]).toMatchObject({ value: 20_000n, timestamp: recent / 1000 + 59 });
    // The two may fall in one month or two: each figure is where its usage is.
    const all = (
      await Promise.all([...new Set([month(old), month(recent)])].map((m) => billingStatus(db, m, 'hooli')))
    ).flat();
    expect(all.map((st) => st.expired_usd)).toContain('0.01');
    expect(all.map((st) => st.sent_usd)).toContain('0.02');
    expect(all.every((st) => st.pending_usd === '0')).toBe(true);
  });

  it('is sent by one of two sidecars sending at once, never both', async () => {
    const stripe = await startFakeStripe();
    const acct = await accountId(db, 'pied');
    await linkSince(db, { account: 'pied', target: 'stripe', customer: 'cus_Acme1', markupPct: '12.5' });
    const rows = Array.from({ length: 40 }, (_, i) => ({ at: minuteAgo(50 - i) + 7_000, cost: '0.00012345' }));
    await seed(db, acct, rows);
    const one = sender(db, stripe).sender;
    const two = sender(db, stripe).sender;
    await Promise.all([one.pass(), two.pass(), one.pass(), two.pass()]);
    await passUntil(one, () => stripe.accepted.length === 40);
    // Each minute once: no identifier was even sent twice.
    expect(stripe.requests).toHaveLength(40);
    // 40 × 0.00012345 × 1.125 = 0.005555250 $ = 5555.25 µ$ → 5555, rounded once.
    expect(stripe.totals().get('cus_Acme1')).toBe(5_555n);
  });
});

// TimescaleDB mode (usage_events a hypertable): the same derivation, once (its engine is slow to start).
describe('billing to Stripe [timescale]', () => {
  it(
    'sends one event per minute with usage, carried, late usage as <n>+1, exactly once',
    async () => sendsEachMinuteOnce(await timescaleBackend.open()),
    120_000,
  );
});

describe('meterEventIdentifier', () => {
  it('is meter_<link id>_<YYYYMMDDHHmm>_<n>, within Stripe’s 100 characters', () => {
    const id = meterEventIdentifier('bl0123456789ab', new Date('2026-01-31T23:59:00Z'), 12);
    expect(id).toBe('meter_bl0123456789ab_202601312359_12');
    expect(id.length).toBeLessThanOrEqual(100);
  });
});
