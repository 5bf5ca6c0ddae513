import { expect, it } from 'vitest';
import { AlertDeliverer, DEFAULT_DELIVERER_OPTIONS } from '../../src/alerts/deliverer.js';
import { BudgetMonitor } from '../../src/budget/monitor.js';
import { DaemonMetrics } from '../../src/metrics/registry.js';
import { addWebhook, createAccount, seedSpend, setBudgetRow, silentLogger } from '../budget/helpers/seed.js';
import { httpReceiver, waitFor } from '../alerts/helpers/receivers.js';
import { openStoreForFile } from '../helpers/file-stores.js';
import { parseExposition } from '../helpers/prom-text.js';

/** meter_alert_deliveries_total counts each attempt by channel kind and result, and shows
 *  neither the channel's target nor the account. */
it('counts alert delivery attempts by channel and result', async () => {
  const db = await openStoreForFile('postgres');
  const rx = await httpReceiver((n) => (n === 0 ? 500 : 200));
  const acct = await createAccount(db, 'alert-metrics-acct');
  await setBudgetRow(db, acct, '100');
  await addWebhook(db, acct, `${rx.url}/hook-target-path`);
  await seedSpend(db, acct, '2026-11-14', '55');
  await new BudgetMonitor(db, silentLogger, { sweepMs: 50, now: () => Date.parse('2026-11-15T08:00:00Z') }).refresh();

  const metrics = new DaemonMetrics();
  const deliverer = new AlertDeliverer(db, silentLogger, {
    ...DEFAULT_DELIVERER_OPTIONS,
    pollMs: 25,
    timeoutMs: 2_000,
    retry: { firstRetryMs: 100, maxDelayMs: 400, giveUpAfterMs: 60_000 },
  });
  deliverer.registerMetrics(metrics);
  deliverer.start();
  try {
    await waitFor(() => rx.received.length >= 2, 10_000, 'the retry');
  } finally {
    await deliverer.stop();
  }
  const s = parseExposition(await metrics.scrape());
  expect(s.value('meter_alert_deliveries_total', { channel: 'webhook', result: 'retrying' })).toBe(1);
  expect(s.value('meter_alert_deliveries_total', { channel: 'webhook', result: 'delivered' })).toBe(1);
  expect(s.value('meter_alert_deliveries_total', { result: 'failed' })).toBe(0);
  expect(s.text).not.toContain('hook-target-path');
  expect(s.text).not.toContain('alert-metrics-acct');
}, 60_000);
