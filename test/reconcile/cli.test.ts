import { expect, it } from 'vitest';
import { openStore } from '../../src/store/index.js';
import type { Db } from '../../src/store/types.js';
import { makeEvent, seedEvents } from '../analytics/helpers/seed.js';
import { runCli } from '../helpers/cli.js';
import { describeEachBackend } from '../helpers/stores.js';
import { startFakeAdminApi, type FakeAdminApi } from './fake-admin-api.js';

/**
 * `meter reconcile` end to end: a separate CLI process, the real store (meter's events written by
 * the batch writer's own statement), and the fake admin API as the provider's base address.
 */

const OPENAI_KEY = 'sk-admin-cli-test-9f8e7d6c5b4a';
const at = (day: string, hh = '12') => new Date(`${day}T${hh}:00:00Z`);

async function createAccount(db: Db, name: string): Promise<{ id: string }> {
  const [row] = await db.query<{ id: string }>('INSERT INTO accounts (name) VALUES ($1) RETURNING id::text AS id', [
    name,
  ]);
  return row!;
}

async function withStore<T>(
  config: { databaseUrl?: string | undefined; dataDir: string },
  fn: (db: Db) => Promise<T>,
): Promise<T> {
  const db = await openStore({ databaseUrl: config.databaseUrl, dataDir: config.dataDir });
  try {
    return await fn(db);
  } finally {
    await db.close();
  }
}

function fakeRows(fake: FakeAdminApi) {
  fake.rows['/v1/organization/usage/completions'] = [
    // Day 1: agrees with meter. Day 2: 40 calls through key_x that meter never saw.
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
    {
      date: '2026-02-03',
      model: 'gpt-4o-2024-08-06',
      project_id: 'proj_a',
      api_key_id: 'key_a',
      input_tokens: 2000,
      input_cached_tokens: 500,
      output_tokens: 400,
      num_model_requests: 10,
    },
    {
      date: '2026-02-03',
      model: 'gpt-4o-2024-08-06',
      project_id: 'proj_x',
      api_key_id: 'key_x',
      input_tokens: 8000,
      input_cached_tokens: 0,
      output_tokens: 1600,
      num_model_requests: 40,
    },
  ];
  fake.rows['/v1/organization/usage/embeddings'] = [];
  fake.rows['/v1/organization/costs'] = [
    {
      date: '2026-02-02',
      line_item: 'gpt-4o-2024-08-06, input',
      project_id: 'proj_a',
      amount: { value: 0.00375, currency: 'usd' },
    },
    {
      date: '2026-02-02',
      line_item: 'gpt-4o-2024-08-06, output',
      project_id: 'proj_a',
      amount: { value: 0.004, currency: 'usd' },
    },
    {
      date: '2026-02-03',
      line_item: 'gpt-4o-2024-08-06, input',
      project_id: 'proj_a',
      amount: { value: 0.00375, currency: 'usd' },
    },
    {
      date: '2026-02-03',
      line_item: 'gpt-4o-2024-08-06, output',
      project_id: 'proj_a',
      amount: { value: 0.004, currency: 'usd' },
    },
    {
      date: '2026-02-03',
      line_item: 'gpt-4o-2024-08-06, input',
      project_id: 'proj_x',
      amount: { value: 0.02, currency: 'usd' },
    },
    {
      date: '2026-02-03',
      line_item: 'gpt-4o-2024-08-06, output',
      project_id: 'proj_x',
      amount: { value: 0.016, currency: 'usd' },
    },
  ];
}

describeEachBackend('meter reconcile', (backend) => {
  it(
    'prints days, totals and findings (--json per CONTRACT §7), stores the results, replaces them on a re-run; errors exit 1 storing nothing as complete',
    { timeout: 240_000 },
    async () => {
      const config = await backend.config();
      const fake = await startFakeAdminApi({ openaiKey: OPENAI_KEY, pageSize: 2 });
      fakeRows(fake);
      await withStore(config, async (db) => {
        const acme = await createAccount(db, 'acme');
        const events = [];
        for (const day of ['2026-02-02', '2026-02-03'])
          for (let i = 0; i < 10; i++)
            events.push(
              makeEvent({
                accountId: acme.id,
                time: at(day).toISOString(),
                model: 'gpt-4o-2024-08-06',
                inputTokens: 200,
                cachedInputTokens: 50,
                outputTokens: 40,
                cost: '0.00077500',
              }),
            );
        // A provider error (no usage) and a stream estimated without usage, on a model the provider does not show.
        events.push(
          makeEvent({
            accountId: acme.id,
            time: at('2026-02-02').toISOString(),
            model: 'gpt-4o-mini',
            status: 500,
            usageSource: 'none',
            inputTokens: 0,
            outputTokens: 0,
            cost: '0',
          }),
        );
        events.push(
          makeEvent({
            accountId: acme.id,
            time: at('2026-02-02').toISOString(),
            model: 'gpt-4o-mini',
            usageSource: 'estimated',
            inputTokens: 50,
            outputTokens: 9,
            cost: '0.00001300',
          }),
        );
        await seedEvents(db, events);
      });
      const env = {
        DATABASE_URL: config.databaseUrl ?? '',
        METER_DATA_DIR: config.dataDir,
        METER_UPSTREAM_OPENAI: `${fake.url}/v1`,
        METER_OPENAI_ADMIN_KEY: OPENAI_KEY,
      };

      const r = await runCli(
        ['reconcile', '--provider', 'openai', '--from', '2026-02-01', '--to', '2026-03-01', '--json'],
        env,
      );
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      expect(r.stdout).not.toContain(OPENAI_KEY);
      const out = JSON.parse(r.stdout);
      expect(Object.keys(out)).toEqual([
        'provider',
        'account',
        'from',
        'to',
        'tolerance',
        'days',
        'totals',
        'findings',
        'unattributed',
        'meter_left_out',
      ]);
      expect(out).toMatchObject({
        provider: 'openai',
        account: null,
        from: '2026-02-01',
        to: '2026-03-01',
        tolerance: { usd: 0.01, pct: 1 },
      });
      expect(out.days).toEqual([
        {
          date: '2026-02-02',
          model: 'gpt-4o-2024-08-06',
          provider: { requests: 10, input_tokens: 2000, cached_input_tokens: 500, output_tokens: 400, cost: 0.00775 },
          meter: { requests: 10, input_tokens: 2000, cached_input_tokens: 500, output_tokens: 400, cost: 0.00775 },
          diff_usd: 0,
          diff_pct: 0,
        },
        {
          date: '2026-02-02',
          model: 'gpt-4o-mini',
          provider: { requests: 0, input_tokens: 0, cached_input_tokens: 0, output_tokens: 0, cost: 0 },
          meter: { requests: 1, input_tokens: 50, cached_input_tokens: 0, output_tokens: 9, cost: 0.000013 },
          diff_usd: 0.000013,
          diff_pct: null,
        },
        {
          date: '2026-02-03',
          model: 'gpt-4o-2024-08-06',
          provider: { requests: 50, input_tokens: 10000, cached_input_tokens: 500, output_tokens: 2000, cost: 0.04375 },
          meter: { requests: 10, input_tokens: 2000, cached_input_tokens: 500, output_tokens: 400, cost: 0.00775 },
          diff_usd: -0.036,
          diff_pct: -82.28,
        },
      ]);
      expect(out.totals).toEqual({
        provider_cost: 0.0515,
        meter_cost: 0.015513,
        diff_usd: -0.035987,
        diff_pct: -69.87,
      });
      expect(out.findings.map((f: { kind: string; date: string; model: string }) => [f.kind, f.date, f.model])).toEqual(
        [
          ['meter_only', '2026-02-02', 'gpt-4o-mini'],
          ['bypass', '2026-02-03', 'gpt-4o-2024-08-06'],
        ],
      );
      expect(out.findings[0].by_usage_source).toEqual({
        estimated: { calls: 1, cost: 0.000013 },
        none: { calls: 1, cost: 0 },
      });
      expect(out.findings[1].detail).toContain('api key key_x');

      // The text form: the same figures, the tolerance and the findings.
      const text = await runCli(
        ['reconcile', '--provider', 'openai', '--from', '2026-02-01', '--to', '2026-03-01'],
        env,
      );
      expect(text.code).toBe(0);
      expect(text.stdout).toContain('total    provider $0.0515  meter $0.015513  difference $-0.035987 (-69.87%)');
      expect(text.stdout).toMatch(/bypass\s+2026-02-03 gpt-4o-2024-08-06: 40 more calls \(50 vs 10\)/);
      expect(text.stdout).toContain('tolerance: $0.01 or 1% per day and model');

      const stored = await withStore(config, (db) =>
        db.query<{ day: string; model: string; provider_cost: string; meter_requests: string }>(
          `SELECT day::text AS day, model, provider_cost::text AS provider_cost, meter_requests::text AS meter_requests
             FROM reconcile_results WHERE provider = 'openai' AND scope = '' ORDER BY day, model`,
        ),
      );
      expect(stored).toEqual([
        { day: '2026-02-02', model: 'gpt-4o-2024-08-06', provider_cost: '0.00775000', meter_requests: '10' },
        { day: '2026-02-02', model: 'gpt-4o-mini', provider_cost: '0.00000000', meter_requests: '1' },
        { day: '2026-02-03', model: 'gpt-4o-2024-08-06', provider_cost: '0.04375000', meter_requests: '10' },
      ]);

      // The provider keeps failing: exit 1, one line naming what failed; the stored results stay
      // those of the last complete run, and the failed run is on record.
      fake.failures['/v1/organization/costs'] = Array.from({ length: 5 }, () => ({ status: 503, retryAfter: '0' }));
      fake.rows['/v1/organization/usage/completions'] = [];
      const failed = await runCli(
        ['reconcile', '--provider', 'openai', '--from', '2026-02-01', '--to', '2026-03-01', '--json'],
        env,
      );
      expect(failed.code).toBe(1);
      expect(failed.stdout).toBe('');
      expect(failed.stderr.trim().split('\n')).toHaveLength(1);
      expect(failed.stderr).toMatch(/^meter: openai \/organization\/costs still failing after 5 attempts \(HTTP 503/);
      const after = await withStore(config, async (db) => ({
        results: (await db.query<{ n: string }>(`SELECT count(*)::text AS n FROM reconcile_results`))[0]!.n,
        runs: await db.query<{ status: string; error: string | null }>(
          `SELECT status, error FROM reconcile_runs ORDER BY id`,
        ),
      }));
      expect(after.results).toBe('3');
      expect(after.runs.map((x) => x.status)).toEqual(['complete', 'complete', 'failed']);
      expect(after.runs[2]!.error).toContain('HTTP 503');

      // A key that is not an admin key: exit 1 naming the variable; never the key.
      const refused = await runCli(['reconcile', '--provider', 'openai', '--json'], {
        ...env,
        METER_OPENAI_ADMIN_KEY: 'sk-proj-ordinary',
      });
      expect(refused.code).toBe(1);
      expect(refused.stderr).toMatch(
        /^meter: openai refused METER_OPENAI_ADMIN_KEY \(HTTP 401: .*\): it must be an OpenAI admin key/,
      );
      expect(refused.stderr).not.toContain('sk-proj-ordinary');
      const missing = await runCli(['reconcile', '--provider', 'openai'], { ...env, METER_OPENAI_ADMIN_KEY: '' });
      expect(missing.code).toBe(1);
      expect(missing.stderr.trim()).toBe(
        'meter: METER_OPENAI_ADMIN_KEY is not set: reconciling openai needs an organisation admin key',
      );
      const usage = await runCli(['reconcile', '--provider', 'gemini'], env);
      expect(usage.code).toBe(2);
      expect(usage.stderr).toContain('--provider "gemini" is invalid: expected openai or anthropic');
      const range = await runCli(
        ['reconcile', '--provider', 'openai', '--from', '2026-03-01', '--to', '2026-02-01'],
        env,
      );
      expect(range.code).toBe(2);
      expect(range.stderr).toContain('--to 2026-02-01 must be after --from 2026-03-01');
    },
  );

  it(
    'maps a project to an account, reconciles that account only, and masks the admin key in meter config',
    { timeout: 180_000 },
    async () => {
      const config = await backend.config();
      const fake = await startFakeAdminApi({ openaiKey: OPENAI_KEY, pageSize: 31 });
      fakeRows(fake);
      const ids = await withStore(config, async (db) => {
        const acme = await createAccount(db, 'acme');
        await createAccount(db, 'other');
        await seedEvents(
          db,
          Array.from({ length: 10 }, () =>
            makeEvent({
              accountId: acme.id,
              time: at('2026-02-03').toISOString(),
              model: 'gpt-4o-2024-08-06',
              inputTokens: 200,
              cachedInputTokens: 50,
              outputTokens: 40,
              cost: '0.00077500',
            }),
          ),
        );
        return { acme: acme.id };
      });
      const env = {
        DATABASE_URL: config.databaseUrl ?? '',
        METER_DATA_DIR: config.dataDir,
        METER_UPSTREAM_OPENAI: `${fake.url}/v1`,
        METER_OPENAI_ADMIN_KEY: OPENAI_KEY,
      };
      const map = await runCli(
        ['reconcile', 'map', '--provider', 'openai', '--project', 'proj_a', '--account', 'acme', '--json'],
        env,
      );
      expect(map.code).toBe(0);
      expect(JSON.parse(map.stdout)).toEqual({
        provider: 'openai',
        kind: 'project',
        external_id: 'proj_a',
        account_id: ids.acme,
        account: 'acme',
      });
      const bad = await runCli(
        ['reconcile', 'map', '--provider', 'openai', '--workspace', 'w', '--account', 'acme'],
        env,
      );
      expect(bad.code).toBe(2);
      expect(bad.stderr).toContain('--workspace is for anthropic');
      const noAccount = await runCli(
        ['reconcile', 'map', '--provider', 'openai', '--project', 'p', '--account', 'nobody'],
        env,
      );
      expect(noAccount.code).toBe(1);
      expect(noAccount.stderr).toContain('--account "nobody": no such account');

      const r = await runCli(
        [
          'reconcile',
          '--provider',
          'openai',
          '--account',
          'acme',
          '--from',
          '2026-02-03',
          '--to',
          '2026-02-04',
          '--json',
        ],
        env,
      );
      expect(r.code).toBe(0);
      const out = JSON.parse(r.stdout);
      // proj_x's traffic is not acme's: acme's day agrees.
      expect(out.account).toBe('acme');
      expect(out.days).toHaveLength(1);
      expect(out.days[0].provider).toEqual({
        requests: 10,
        input_tokens: 2000,
        cached_input_tokens: 500,
        output_tokens: 400,
        cost: 0.00775,
      });
      expect(out.findings).toEqual([]);
      const scopes = await withStore(config, (db) =>
        db.query<{ scope: string }>('SELECT DISTINCT scope FROM reconcile_results'),
      );
      expect(scopes).toEqual([{ scope: ids.acme }]);

      const unmapped = await runCli(['reconcile', '--provider', 'openai', '--account', 'other'], env);
      expect(unmapped.code).toBe(1);
      expect(unmapped.stderr).toContain('--account "other" has no openai mapping');

      const cfg = await runCli(['config', '--json'], env);
      expect(cfg.stdout).not.toContain(OPENAI_KEY);
      const vars = JSON.parse(cfg.stdout).variables as { variable: string; value: string | null; source: string }[];
      expect(vars.find((v) => v.variable === 'METER_OPENAI_ADMIN_KEY')).toEqual({
        variable: 'METER_OPENAI_ADMIN_KEY',
        value: '***',
        source: 'environment',
      });
      expect(vars.find((v) => v.variable === 'METER_RECONCILE_ALERT_PCT')).toEqual({
        variable: 'METER_RECONCILE_ALERT_PCT',
        value: '2',
        source: 'default',
      });

      const list = await runCli(['reconcile', 'mappings', '--json'], env);
      expect(JSON.parse(list.stdout).mappings).toHaveLength(1);
      const unmap = await runCli(['reconcile', 'unmap', '--provider', 'openai', '--project', 'proj_a', '--json'], env);
      expect(JSON.parse(unmap.stdout)).toEqual({ removed: true });
    },
  );
});
