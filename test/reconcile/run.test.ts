/** One run against the real store (both back-ends), Anthropic's shapes: the results stored, a
 *  429 then success, and a run that fails part-way leaving the earlier results in place. */
import { expect, it } from 'vitest';
import { localStore } from '../../src/admin/client.js';
import { runReconciliation } from '../../src/reconcile/run.js';
import { Secret } from '../../src/secret.js';
import { readResults } from '../../src/reconcile/store.js';
import type { Db } from '../../src/store/types.js';
import { makeEvent, seedEvents } from '../analytics/helpers/seed.js';
import { describeEachBackend } from '../helpers/stores.js';
import { startFakeAdminApi } from './fake-admin-api.js';

const KEY = 'sk-ant-admin01-run-test';
const MODEL = 'claude-sonnet-4-20250514';

describeEachBackend('a reconciliation run (Anthropic)', (backend) => {
  it(
    'stores the results; 429 then success; a run failing part-way stores nothing as complete',
    { timeout: 120_000 },
    async () => {
      const db: Db = await backend.open();
      const [{ id }] = (await db.query<{ id: string }>(
        "INSERT INTO accounts (name) VALUES ('acme') RETURNING id::text AS id",
      )) as [{ id: string }];
      // meter: 3 calls of 500 input tokens each (66 of them cache reads); the provider: 1002 uncached + 198 cache reads + 300 cache writes.
      await seedEvents(
        db,
        Array.from({ length: 3 }, () =>
          makeEvent({
            accountId: id,
            time: new Date('2026-01-05T10:00:00Z').toISOString(),
            provider: 'anthropic',
            model: MODEL,
            inputTokens: 500,
            cachedInputTokens: 66,
            cacheWriteTokens: 100,
            outputTokens: 50,
            cost: '0.00300000',
          }),
        ),
      );
      const fake = await startFakeAdminApi({ anthropicKey: KEY, pageSize: 2 });
      fake.rows['/v1/organizations/usage_report/messages'] = [
        {
          date: '2026-01-05',
          model: MODEL,
          api_key_id: 'apikey_a',
          workspace_id: null,
          service_tier: 'standard',
          uncached_input_tokens: 1002,
          cache_read_input_tokens: 198,
          cache_creation: { ephemeral_1h_input_tokens: 100, ephemeral_5m_input_tokens: 200 },
          output_tokens: 150,
          server_tool_use: { web_search_requests: 0 },
        },
      ];
      fake.rows['/v1/organizations/cost_report'] = [
        {
          date: '2026-01-05',
          currency: 'USD',
          amount: '0.6',
          description: 'Claude Sonnet 4 Usage - Input Tokens',
          model: MODEL,
          token_type: 'uncached_input_tokens',
          cost_type: 'tokens',
          workspace_id: null,
        },
        {
          date: '2026-01-05',
          currency: 'USD',
          amount: '0.3',
          description: 'Claude Sonnet 4 Usage - Output Tokens',
          model: MODEL,
          token_type: 'output_tokens',
          cost_type: 'tokens',
          workspace_id: null,
        },
      ];
      fake.failures['/v1/organizations/usage_report/messages'] = [{ status: 429, retryAfter: '0' }];
      const config = { upstreams: { anthropic: `${fake.url}/v1` }, adminKeys: { anthropic: new Secret(KEY) } };
      const opts = {
        provider: 'anthropic' as const,
        from: '2026-01-01',
        to: '2026-01-08',
        now: new Date('2026-01-20T00:00:00Z'),
        config,
        retry: { firstDelayMs: 1, maxDelayMs: 5 },
      };

      const r = await runReconciliation(localStore(db), opts);
      expect(r.days).toHaveLength(1);
      expect(r.days[0]!.provider).toEqual({
        requests: null,
        input_tokens: 1500n,
        cached_input_tokens: 198n,
        output_tokens: 150n,
        cost: 900_000n,
      });
      expect(r.days[0]!.meter).toMatchObject({
        requests: 3n,
        input_tokens: 1500n,
        cached_input_tokens: 198n,
        output_tokens: 150n,
        cost: 900_000n,
      });
      expect(r.findings).toEqual([]);
      expect(fake.requests.filter((x) => x.path === '/v1/organizations/usage_report/messages')).toHaveLength(1 + 4); // the 429, then 4 pages of 2 days
      const stored = await readResults(db, 'anthropic', '', '2026-01-01', '2026-02-01');
      expect(stored).toEqual([
        expect.objectContaining({
          date: '2026-01-05',
          model: MODEL,
          provider_requests: null,
          provider_input_tokens: '1500',
          provider_cost: '0.00900000',
          meter_cost: '0.00900000',
        }),
      ]);

      // The cost report keeps failing after the usage was read: the run fails, the stored
      // results stay those of the last complete run.
      fake.rows['/v1/organizations/usage_report/messages'] = [];
      fake.failures['/v1/organizations/cost_report'] = Array.from({ length: 5 }, () => ({ status: 500 }));
      await expect(runReconciliation(localStore(db), opts)).rejects.toThrow(
        /anthropic \/organizations\/cost_report still failing after 5 attempts \(HTTP 500/,
      );
      expect(await readResults(db, 'anthropic', '', '2026-01-01', '2026-02-01')).toEqual(stored);
      const runs = await db.query<{ status: string }>('SELECT status FROM reconcile_runs ORDER BY id');
      expect(runs.map((x) => x.status)).toEqual(['complete', 'failed']);
      const all =
        JSON.stringify(await db.query('SELECT * FROM reconcile_runs')) +
        JSON.stringify(await db.query('SELECT * FROM reconcile_results'));
      expect(all).not.toContain(KEY);
    },
  );
});
