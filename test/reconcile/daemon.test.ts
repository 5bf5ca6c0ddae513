/** The daily job in the daemon: it reconciles when an admin key is set, stores the results that
 *  /analytics/reconciliation serves, reports /metrics per provider and queues one drift alert. */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { alertFacts, alertHeadline, webhookBody, type BudgetAlert } from '../../src/alerts/alert.js';
import { analyticsComponent } from '../../src/analytics/index.js';
import { createAccount } from '../../src/auth/accounts.js';
import { createKey } from '../../src/auth/keys.js';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/log.js';
import { reconcileDue, reconcileJob } from '../../src/reconcile/job.js';
import { startDaemon, type Daemon } from '../../src/server/daemon.js';
import { openStore } from '../../src/store/index.js';
import { makeEvent, seedEvents } from '../analytics/helpers/seed.js';
import { describeEachBackend } from '../helpers/stores.js';
import { startFakeAdminApi, type FakeAdminApi } from './fake-admin-api.js';

const KEY = 'sk-admin-daemon-test-55aa';
const NOW = new Date('2026-02-10T12:00:00Z');

describeEachBackend('reconciliation in the daemon', (backend) => {
  let daemon: Daemon;
  let fake: FakeAdminApi;
  let serviceKey: string;
  let config: ReturnType<typeof loadConfig>;

  beforeAll(async () => {
    const store = await backend.config();
    fake = await startFakeAdminApi({ openaiKey: KEY, pageSize: 3 });
    fake.rows['/v1/organization/usage/completions'] = [
      {
        date: '2026-02-02',
        model: 'gpt-4o-2024-08-06',
        project_id: 'proj_a',
        api_key_id: 'key_a',
        input_tokens: 2000,
        input_cached_tokens: 500,
        output_tokens: 400,
        num_model_requests: 10,
      },
    ];
    fake.rows['/v1/organization/usage/embeddings'] = [];
    // The provider bills the day at $1; meter priced it at $0.775: 22.5% under.
    fake.rows['/v1/organization/costs'] = [
      {
        date: '2026-02-02',
        line_item: 'gpt-4o-2024-08-06, input',
        project_id: 'proj_a',
        amount: { value: 0.6, currency: 'usd' },
      },
      {
        date: '2026-02-02',
        line_item: 'gpt-4o-2024-08-06, output',
        project_id: 'proj_a',
        amount: { value: 0.4, currency: 'usd' },
      },
    ];
    const seed = await openStore({ databaseUrl: store.databaseUrl, dataDir: store.dataDir });
    try {
      await createAccount(seed, 'acme', 'pro');
      serviceKey = (await createKey(seed, 'acme')).key;
      const [{ id }] = (await seed.query<{ id: string }>(
        "SELECT id::text AS id FROM accounts WHERE name = 'acme'",
      )) as [{ id: string }];
      await seed.query(
        `INSERT INTO alert_channels (id, account_id, kind, target, secret) VALUES ('0123456789ab', $1::uuid, 'webhook', 'http://127.0.0.1:9/hook', 's3cret')`,
        [id],
      );
      await seedEvents(
        seed,
        Array.from({ length: 10 }, () =>
          makeEvent({
            accountId: id,
            time: new Date('2026-02-02T12:00:00Z').toISOString(),
            model: 'gpt-4o-2024-08-06',
            inputTokens: 200,
            cachedInputTokens: 50,
            outputTokens: 40,
            cost: '0.07750000',
          }),
        ),
      );
    } finally {
      await seed.close();
    }
    config = loadConfig({
      METER_HOST: '127.0.0.1',
      METER_PORT: '0',
      METER_DATA_DIR: store.dataDir,
      METER_KEY_REFRESH_MS: '100',
      METER_UPSTREAM_OPENAI: `${fake.url}/v1`,
      METER_OPENAI_ADMIN_KEY: KEY,
      ...(store.databaseUrl ? { DATABASE_URL: store.databaseUrl } : {}),
    });
    daemon = await startDaemon(config, createLogger('silent'), async (ctx, start) => {
      await start(await analyticsComponent(ctx));
      await start(reconcileJob(ctx, { firstCheckMs: 0, now: () => NOW }));
    });
  }, 120_000);
  afterAll(() => daemon?.close());

  it(
    'runs the daily reconciliation, serves it, reports it in /metrics and sends one drift alert',
    { timeout: 120_000 },
    async () => {
      for (let i = 0; i < 200; i++) {
        const [row] = await daemon.store.query<{ n: number }>(
          "SELECT count(*)::int AS n FROM reconcile_runs WHERE status = 'complete'",
        );
        if (row!.n > 0) break;
        await new Promise((r) => setTimeout(r, 100));
      }
      // The month so far: 2026-02-01 to today (exclusive).
      const runs = await daemon.store.query<{ from_day: string; to_day: string; scope: string }>(
        'SELECT from_day::text AS from_day, to_day::text AS to_day, scope FROM reconcile_runs',
      );
      expect(runs).toEqual([{ from_day: '2026-02-01', to_day: '2026-02-10', scope: '' }]);
      for (const r of fake.requests) expect(r.headers.authorization).toBe(`Bearer ${KEY}`);

      const res = await fetch(`${daemon.url}/analytics/reconciliation?provider=openai&month=2026-02`, {
        headers: { authorization: `Bearer ${serviceKey}` },
      });
      expect(res.status).toBe(200);
      const body = (await res.json()) as { days: unknown[]; findings: { kind: string }[] } & Record<string, unknown>;
      // acme is the store's one account: it sees the organisation's results.
      expect(body).toMatchObject({
        provider: 'openai',
        month: '2026-02',
        scope: 'organisation',
        days: [
          {
            date: '2026-02-02',
            model: 'gpt-4o-2024-08-06',
            provider: { requests: 10, input_tokens: 2000, cached_input_tokens: 500, output_tokens: 400, cost: 1 },
            meter: { requests: 10, input_tokens: 2000, cached_input_tokens: 500, output_tokens: 400, cost: 0.775 },
            diff_usd: -0.225,
            diff_pct: -22.5,
          },
        ],
        totals: { provider_cost: 1, meter_cost: 0.775, diff_usd: -0.225, diff_pct: -22.5 },
      });
      expect(body.findings.map((f: { kind: string }) => f.kind)).toEqual(['price_drift']);
      const bad = await fetch(`${daemon.url}/analytics/reconciliation?provider=gemini`, {
        headers: { authorization: `Bearer ${serviceKey}` },
      });
      expect(bad.status).toBe(400);
      expect(((await bad.json()) as { error: { message: string } }).error.message).toContain(
        'provider must be one of openai, anthropic',
      );

      const metrics = await (await fetch(daemon.metricsUrl)).text();
      expect(metrics).toMatch(/^meter_reconciliation_diff_pct\{provider="openai"\} -22\.5$/m);
      expect(metrics).toMatch(/^meter_reconciliation_diff_usd\{provider="openai"\} -0\.225$/m);
      expect(metrics).not.toContain(KEY);

      const deliveries = await daemon.store.query<{ payload: BudgetAlert | string; account_id: string }>(
        'SELECT payload, account_id::text AS account_id FROM alert_deliveries',
      );
      expect(deliveries).toHaveLength(1);
      const alert =
        typeof deliveries[0]!.payload === 'string'
          ? (JSON.parse(deliveries[0]!.payload) as BudgetAlert)
          : deliveries[0]!.payload;
      expect(alert).toMatchObject({
        type: 'reconciliation.drift',
        account: 'acme',
        month: '2026-02',
        reconciliation: {
          provider: 'openai',
          scope: 'organisation',
          provider_cost: '1',
          meter_cost: '0.775',
          diff_usd: '-0.225',
          diff_pct: '-22.50',
          threshold_pct: '2',
        },
      });
      const hook = JSON.parse(webhookBody(alert));
      expect(Object.keys(hook).slice(0, 3)).toEqual(['id', 'type', 'account']);
      expect(hook.reconciliation).toMatchObject({ provider_cost: 1, diff_pct: -22.5 });
      // Slack, Teams and e-mail say what drifted.
      expect(alertHeadline(alert)).toBe(
        "Reconciliation drift: meter's 2026-02 openai figures are -22.50% off the provider's own report",
      );
      expect(alertFacts(alert)).toContainEqual(['Difference', '$-0.225 (-22.50%, alert above 2%)']);

      // Due again (a later day): the run repeats, the month's alert does not.
      await reconcileDue(daemon.store, config, createLogger('silent'), { everyMs: 0, now: () => NOW });
      const [counts] = await daemon.store.query<{ runs: number; alerts: number; fired: number }>(
        `SELECT (SELECT count(*)::int FROM reconcile_runs) AS runs, (SELECT count(*)::int FROM alert_deliveries) AS alerts,
              (SELECT count(*)::int FROM reconcile_alerts_fired) AS fired`,
      );
      expect(counts).toEqual({ runs: 2, alerts: 1, fired: 1 });
    },
  );
});
