import { beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_RETRY_POLICY, retryDelayMs } from '../../src/alerts/backoff.js';
import { AlertDeliverer, DEFAULT_DELIVERER_OPTIONS } from '../../src/alerts/deliverer.js';
import { listChannels } from '../../src/alerts/channels-admin.js';
import { BudgetMonitor } from '../../src/budget/monitor.js';
import type { Db } from '../../src/store/types.js';
import { addWebhook, createAccount, seedSpend, setBudgetRow, silentLogger } from '../budget/helpers/seed.js';
import { describeEachBackend } from '../helpers/stores.js';
import { httpReceiver, waitFor } from './helpers/receivers.js';

describe('retry backoff', () => {
  it('production default: first retry within 10 s, doubling, capped, about a day of retries', () => {
    const waits = Array.from({ length: 40 }, (_, i) => retryDelayMs(DEFAULT_RETRY_POLICY, i + 1));
    expect(waits[0]).toBeLessThanOrEqual(10_000);
    expect(waits[1]).toBe(waits[0]! * 2);
    expect(Math.max(...waits)).toBeLessThanOrEqual(DEFAULT_RETRY_POLICY.maxDelayMs);
    expect(DEFAULT_RETRY_POLICY.giveUpAfterMs).toBe(24 * 3_600_000);
  });
});

describeEachBackend('alert outbox deliverer', (backend) => {
  let db: Db;
  const now = () => new Date('2026-11-15T08:00:00Z');
  beforeAll(async () => {
    db = await backend.open();
  });

  /** An account at `pct`% of a 100 USD budget with one webhook channel; returns the fired levels. */
  async function fire(name: string, url: string, spend: string) {
    const acct = await createAccount(db, name);
    await setBudgetRow(db, acct, '100');
    const channel = await addWebhook(db, acct, url);
    await seedSpend(db, acct, '2026-11-14', spend);
    const fired = await new BudgetMonitor(db, silentLogger, { sweepMs: 50, now: () => now().getTime() }).refresh();
    return { acct, channel, fired };
  }
  const fast = (retry: Partial<typeof DEFAULT_RETRY_POLICY>) =>
    new AlertDeliverer(db, silentLogger, {
      ...DEFAULT_DELIVERER_OPTIONS,
      pollMs: 25,
      timeoutMs: 2_000,
      retry: { firstRetryMs: 100, maxDelayMs: 400, giveUpAfterMs: 60_000, ...retry },
    });

  it('a receiver that fails first and then accepts gets the alert exactly once, retried with the same Meter-Event-Id', async () => {
    const rx = await httpReceiver((n) => (n === 0 ? 500 : 200));
    const { channel, fired } = await fire('flaky', `${rx.url}/hook`, '55');
    expect(fired.map((f) => f.level)).toEqual([50]);
    const deliverer = fast({});
    deliverer.start();
    try {
      await waitFor(() => rx.received.length >= 2, 10_000, 'the retry');
      await new Promise((r) => setTimeout(r, 300)); // nothing more arrives
    } finally {
      await deliverer.stop();
    }
    expect(rx.received).toHaveLength(2);
    const [first, second] = rx.received;
    expect(second!.headers['meter-event-id']).toBe(first!.headers['meter-event-id']);
    expect(second!.body).toBe(first!.body);
    const log = await db.query<{ ok: boolean; status_code: number; error: string | null }>(
      `SELECT a.ok, a.status_code, a.error FROM alert_delivery_attempts a WHERE a.channel_id = $1 ORDER BY a.id`,
      [channel],
    );
    expect(log).toEqual([
      { ok: false, status_code: 500, error: 'HTTP 500: receiver says no' },
      { ok: true, status_code: 200, error: null },
    ]);
    const [delivery] = await db.query<{ status: string; attempts: number }>(
      'SELECT status, attempts FROM alert_deliveries WHERE channel_id = $1',
      [channel],
    );
    expect(delivery).toEqual({ status: 'delivered', attempts: 2 });
    const [listed] = await listChannels(db, 'flaky');
    expect(listed).toMatchObject({ last_status: 'delivered', last_detail: 'HTTP 200' });
  });

  it('keeps retrying with growing waits, then gives up and marks the delivery failed', async () => {
    const rx = await httpReceiver(() => 503);
    const { channel } = await fire('down', `${rx.url}/hook`, '60');
    const deliverer = fast({ firstRetryMs: 50, maxDelayMs: 200, giveUpAfterMs: 700 });
    deliverer.start();
    try {
      await waitFor(
        async () => {
          const [d] = await db.query<{ status: string }>('SELECT status FROM alert_deliveries WHERE channel_id = $1', [
            channel,
          ]);
          return d?.status === 'failed';
        },
        15_000,
        'the delivery to be given up',
      );
    } finally {
      await deliverer.stop();
    }
    // 50, 100, 200, 200… ms apart within 700 ms: several tries, not a tight loop.
    expect(rx.received.length).toBeGreaterThanOrEqual(3);
    expect(rx.received.length).toBeLessThanOrEqual(10);
    const [{ n }] = (await db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM alert_delivery_attempts WHERE channel_id = $1',
      [channel],
    )) as [{ n: number }];
    expect(n).toBe(rx.received.length);
    const [listed] = await listChannels(db, 'down');
    expect(listed).toMatchObject({ last_status: 'failed', last_detail: 'HTTP 503: receiver says no' });
  });

  it('a channel gets its alerts in the order they fired, even when the first one needs a retry', async () => {
    const rx = await httpReceiver((n) => (n === 0 ? 502 : 200));
    const { fired } = await fire('ordered', `${rx.url}/hook`, '130');
    expect(fired.map((f) => f.level)).toEqual([50, 80, 100]);
    const deliverer = fast({});
    deliverer.start();
    try {
      await waitFor(() => rx.received.length >= 4, 10_000, 'three alerts and one retry');
    } finally {
      await deliverer.stop();
    }
    expect(rx.received.map((r) => (JSON.parse(r.body) as { level: number }).level)).toEqual([50, 50, 80, 100]);
  });
});
