import { describe, expect, it } from 'vitest';
import { fetchAnthropicReport } from '../../src/reconcile/anthropic.js';
import { ProviderApiError, retryAfterMs, type AdminApi } from '../../src/reconcile/http.js';
import { fetchOpenAIReport, splitLineItem } from '../../src/reconcile/openai.js';
import { adminApi } from '../../src/reconcile/run.js';
import { Secret } from '../../src/secret.js';
import { startFakeAdminApi } from './fake-admin-api.js';

const OPENAI_KEY = 'sk-admin-test-0123456789';
const ANTHROPIC_KEY = 'sk-ant-admin01-test-0123456789';

function apis(url: string) {
  const config = {
    upstreams: { openai: `${url}/v1`, anthropic: `${url}/v1` },
    adminKeys: { openai: new Secret(OPENAI_KEY), anthropic: new Secret(ANTHROPIC_KEY) },
  };
  const fast = { firstDelayMs: 5, maxDelayMs: 20 };
  return { openai: adminApi('openai', config, fast), anthropic: adminApi('anthropic', config, fast) };
}

describe('OpenAI admin reports', () => {
  it('reads every page of usage (completions and embeddings) and costs, empty days included, grouped by model, project and key', async () => {
    const fake = await startFakeAdminApi({ openaiKey: OPENAI_KEY, pageSize: 2 });
    fake.rows['/v1/organization/usage/completions'] = [
      // Standard and batch and priority tiers of one model and day: summed per model.
      {
        date: '2026-03-01',
        model: 'gpt-4o-2024-08-06',
        project_id: 'proj_a',
        api_key_id: 'key_a',
        batch: false,
        service_tier: 'default',
        input_tokens: 1000,
        input_cached_tokens: 400,
        output_tokens: 200,
        num_model_requests: 4,
      },
      {
        date: '2026-03-01',
        model: 'gpt-4o-2024-08-06',
        project_id: 'proj_a',
        api_key_id: 'key_a',
        batch: true,
        service_tier: 'batch',
        input_tokens: 500,
        input_cached_tokens: 0,
        output_tokens: 50,
        num_model_requests: 1,
      },
      {
        date: '2026-03-01',
        model: 'gpt-4o-2024-08-06',
        project_id: 'proj_b',
        api_key_id: 'key_b',
        batch: false,
        service_tier: 'priority',
        input_tokens: 100,
        input_cached_tokens: 0,
        output_tokens: 10,
        num_model_requests: 1,
      },
      {
        date: '2026-03-04',
        model: 'gpt-4o-mini',
        project_id: 'proj_a',
        api_key_id: 'key_a',
        input_tokens: 10,
        input_cached_tokens: 0,
        output_tokens: 1,
        num_model_requests: 1,
      },
    ];
    fake.rows['/v1/organization/usage/embeddings'] = [
      {
        date: '2026-03-02',
        model: 'text-embedding-3-small',
        project_id: 'proj_a',
        api_key_id: 'key_a',
        input_tokens: 77,
        num_model_requests: 3,
      },
    ];
    fake.rows['/v1/organization/costs'] = [
      {
        date: '2026-03-01',
        line_item: 'gpt-4o-2024-08-06, input',
        project_id: 'proj_a',
        amount: { value: 0.00345, currency: 'usd' },
      },
      {
        date: '2026-03-01',
        line_item: 'gpt-4o-2024-08-06, output',
        project_id: 'proj_a',
        amount: { value: '0.0025', currency: 'usd' },
      },
      {
        date: '2026-03-03',
        line_item: 'web search tool calls',
        project_id: 'proj_a',
        amount: { value: 0.03, currency: 'usd' },
      },
    ];
    const report = await fetchOpenAIReport(apis(fake.url).openai, '2026-03-01', '2026-03-06', { costByApiKey: false });

    // 5 days at 2 buckets a page: 3 pages of each report, each asked with the cursor it was given.
    const completions = fake.requests.filter((r) => r.path === '/v1/organization/usage/completions');
    expect(completions.map((r) => r.query.get('page'))).toEqual([null, 'page_Mg==', 'page_NA==']);
    expect(completions[0]!.query.getAll('group_by[]')).toEqual(['model', 'project_id', 'api_key_id']);
    expect(completions[0]!.query.get('bucket_width')).toBe('1d');
    expect(completions[0]!.query.get('start_time')).toBe(String(Date.parse('2026-03-01T00:00:00Z') / 1000));
    expect(completions[0]!.query.get('end_time')).toBe(String(Date.parse('2026-03-06T00:00:00Z') / 1000));
    expect(fake.requests.every((r) => r.headers.authorization === `Bearer ${OPENAI_KEY}`)).toBe(true);
    expect(fake.requests.find((r) => r.path === '/v1/organization/costs')!.query.getAll('group_by[]')).toEqual([
      'line_item',
      'project_id',
    ]);

    const gpt4o = report.usage.filter((u) => u.model === 'gpt-4o-2024-08-06');
    // Grouped by model, project and key (not tier): the standard and batch rows of key_a are one.
    expect(gpt4o).toHaveLength(2);
    expect(gpt4o.find((u) => u.groups.api_key === 'key_a')).toMatchObject({
      date: '2026-03-01',
      requests: 5n,
      input_tokens: 1500n,
      cached_input_tokens: 400n,
      output_tokens: 250n,
      groups: { project: 'proj_a', api_key: 'key_a' },
    });
    expect(report.usage.find((u) => u.model === 'text-embedding-3-small')).toMatchObject({
      input_tokens: 77n,
      output_tokens: 0n,
      requests: 3n,
    });
    expect(report.usage.find((u) => u.model === 'gpt-4o-mini')?.date).toBe('2026-03-04');
    expect(report.costs).toEqual([
      {
        date: '2026-03-01',
        model: 'gpt-4o-2024-08-06',
        item: 'input',
        description: 'gpt-4o-2024-08-06, input',
        amount: 345_000n,
        groups: { project: 'proj_a', api_key: null },
      },
      {
        date: '2026-03-01',
        model: 'gpt-4o-2024-08-06',
        item: 'output',
        description: 'gpt-4o-2024-08-06, output',
        amount: 250_000n,
        groups: { project: 'proj_a', api_key: null },
      },
      {
        date: '2026-03-03',
        model: null,
        item: null,
        description: 'web search tool calls',
        amount: 3_000_000n,
        groups: { project: 'proj_a', api_key: null },
        tool: 'web_search',
      },
    ]);
  });

  it('ungrouped costs (line_item null) are one amount per day', async () => {
    const fake = await startFakeAdminApi({ openaiKey: OPENAI_KEY, pageSize: 31 });
    fake.rows['/v1/organization/usage/completions'] = [];
    fake.rows['/v1/organization/usage/embeddings'] = [];
    fake.rows['/v1/organization/costs'] = [{ date: '2026-03-01', amount: { value: 0.06, currency: 'usd' } }];
    const api = apis(fake.url).openai;
    // Asked grouped; a result whose line_item is null (as the documented ungrouped example) is still read.
    const report = await fetchOpenAIReport(api, '2026-03-01', '2026-03-02', { costByApiKey: true });
    expect(report.costs).toEqual([
      {
        date: '2026-03-01',
        model: null,
        item: null,
        description: 'all line items',
        amount: 6_000_000n,
        groups: { project: null, api_key: null },
      },
    ]);
    expect(report.costGroupable).toEqual(['project', 'api_key']);
  });

  it('splits line items into model and item', () => {
    expect(splitLineItem('gpt-4o-2024-08-06, cached input')).toEqual({
      model: 'gpt-4o-2024-08-06',
      item: 'cached input',
    });
    expect(splitLineItem('gpt-4o')).toEqual({ model: 'gpt-4o', item: null });
  });
});

describe('Anthropic admin reports', () => {
  it('reads usage with cache reads and 1h/5m cache writes, across pages, and costs in cents', async () => {
    const fake = await startFakeAdminApi({ anthropicKey: ANTHROPIC_KEY, pageSize: 1 });
    fake.rows['/v1/organizations/usage_report/messages'] = [
      {
        date: '2026-03-01',
        model: 'claude-sonnet-4-20250514',
        api_key_id: 'apikey_a',
        workspace_id: 'wrkspc_a',
        service_tier: 'standard',
        context_window: '0-200k',
        uncached_input_tokens: 1500,
        cache_read_input_tokens: 200,
        cache_creation: { ephemeral_1h_input_tokens: 1000, ephemeral_5m_input_tokens: 500 },
        output_tokens: 500,
        server_tool_use: { web_search_requests: 2 },
      },
      {
        date: '2026-03-01',
        model: 'claude-sonnet-4-20250514',
        api_key_id: 'apikey_a',
        workspace_id: 'wrkspc_a',
        service_tier: 'batch',
        context_window: '0-200k',
        uncached_input_tokens: 100,
        cache_read_input_tokens: 0,
        cache_creation: { ephemeral_1h_input_tokens: 0, ephemeral_5m_input_tokens: 0 },
        output_tokens: 10,
        server_tool_use: { web_search_requests: 0 },
      },
      {
        date: '2026-03-03',
        model: 'claude-3-5-haiku-20241022',
        api_key_id: 'apikey_b',
        workspace_id: null,
        service_tier: 'priority',
        uncached_input_tokens: 9,
        cache_read_input_tokens: 0,
        cache_creation: { ephemeral_1h_input_tokens: 0, ephemeral_5m_input_tokens: 0 },
        output_tokens: 1,
        server_tool_use: { web_search_requests: 0 },
      },
    ];
    fake.rows['/v1/organizations/cost_report'] = [
      {
        date: '2026-03-01',
        currency: 'USD',
        amount: '123.45',
        description: 'Claude Sonnet 4 Usage - Input Tokens',
        model: 'claude-sonnet-4-20250514',
        token_type: 'uncached_input_tokens',
        cost_type: 'tokens',
        service_tier: 'standard',
        context_window: '0-200k',
        workspace_id: 'wrkspc_a',
      },
      {
        date: '2026-03-01',
        currency: 'USD',
        amount: '2.5',
        description: 'Web Search Usage',
        model: null,
        token_type: null,
        cost_type: 'web_search',
        workspace_id: 'wrkspc_a',
      },
    ];
    const report = await fetchAnthropicReport(apis(fake.url).anthropic, '2026-03-01', '2026-03-04');
    const usage = fake.requests.filter((r) => r.path === '/v1/organizations/usage_report/messages');
    expect(usage).toHaveLength(3); // 3 days, one bucket a page
    expect(usage[0]!.query.get('starting_at')).toBe('2026-03-01T00:00:00Z');
    expect(usage[0]!.query.get('ending_at')).toBe('2026-03-04T00:00:00Z');
    // By service tier too: Priority Tier usage is left out of the cost report (the usage guide).
    expect(usage[0]!.query.getAll('group_by[]')).toEqual(['model', 'api_key_id', 'workspace_id', 'service_tier']);
    for (const r of fake.requests) {
      expect(r.headers['x-api-key']).toBe(ANTHROPIC_KEY);
      expect(r.headers['anthropic-version']).toBe('2023-06-01');
      expect(r.headers.authorization).toBeUndefined();
    }
    expect(report.usage.filter((u) => u.model === 'claude-sonnet-4-20250514')).toEqual([
      {
        date: '2026-03-01',
        model: 'claude-sonnet-4-20250514',
        requests: null,
        // all input: uncached + cache reads + 1h and 5m cache writes
        input_tokens: 1500n + 200n + 1000n + 500n,
        cached_input_tokens: 200n,
        output_tokens: 500n,
        groups: { workspace: 'wrkspc_a', api_key: 'apikey_a' },
        service_tier: 'standard',
        batch: false,
      },
      {
        date: '2026-03-01',
        model: 'claude-sonnet-4-20250514',
        requests: null,
        input_tokens: 100n,
        cached_input_tokens: 0n,
        output_tokens: 10n,
        groups: { workspace: 'wrkspc_a', api_key: 'apikey_a' },
        service_tier: 'batch',
        batch: true,
      },
    ]);
    expect(report.usage.find((u) => u.date === '2026-03-03')?.groups).toEqual({ workspace: null, api_key: 'apikey_b' });
    // "123.45" cents is $1.2345, "2.5" cents $0.025; a web search charge is no model's tokens.
    expect(report.costs).toEqual([
      {
        date: '2026-03-01',
        model: 'claude-sonnet-4-20250514',
        item: 'uncached_input_tokens',
        description: 'Claude Sonnet 4 Usage - Input Tokens',
        amount: 123_450_000n,
        groups: { workspace: 'wrkspc_a' },
      },
      {
        date: '2026-03-01',
        model: null,
        item: null,
        description: 'Web Search Usage',
        amount: 2_500_000n,
        groups: { workspace: 'wrkspc_a' },
        tool: 'web_search',
      },
    ]);
  });
});

describe('admin API errors', () => {
  it('401: names the variable and says it must be an admin key; the key itself never appears', async () => {
    const fake = await startFakeAdminApi({ openaiKey: 'another', anthropicKey: 'another' });
    const { openai, anthropic } = apis(fake.url);
    const o = await fetchOpenAIReport(openai, '2026-03-01', '2026-03-02', { costByApiKey: false }).catch(
      (e: Error) => e,
    );
    expect(o).toBeInstanceOf(ProviderApiError);
    expect((o as Error).message).toMatch(
      /^openai refused METER_OPENAI_ADMIN_KEY \(HTTP 401: You have insufficient permissions.*\): it must be an OpenAI admin key/,
    );
    const a = await fetchAnthropicReport(anthropic, '2026-03-01', '2026-03-02').catch((e: Error) => e);
    expect((a as Error).message).toMatch(
      /^anthropic refused METER_ANTHROPIC_ADMIN_KEY \(HTTP 401: invalid x-api-key\): it must be an Anthropic Admin API key/,
    );
    for (const e of [o, a]) {
      expect((e as Error).message).not.toContain(OPENAI_KEY);
      expect((e as Error).message).not.toContain(ANTHROPIC_KEY);
    }
  });

  it('429 and 5xx are retried (Retry-After honoured) until success; exhausted retries fail naming the status', async () => {
    const fake = await startFakeAdminApi({ openaiKey: OPENAI_KEY, pageSize: 31 });
    fake.rows['/v1/organization/usage/completions'] = [
      { date: '2026-03-01', model: 'm', input_tokens: 1, output_tokens: 1, num_model_requests: 1 },
    ];
    fake.rows['/v1/organization/usage/embeddings'] = [];
    fake.rows['/v1/organization/costs'] = [];
    fake.failures['/v1/organization/usage/completions'] = [{ status: 429, retryAfter: '0' }, { status: 502 }];
    const api: AdminApi = apis(fake.url).openai;
    const t0 = Date.now();
    const report = await fetchOpenAIReport(api, '2026-03-01', '2026-03-02', { costByApiKey: false });
    expect(report.usage).toHaveLength(1);
    expect(fake.requests.filter((r) => r.path === '/v1/organization/usage/completions')).toHaveLength(3);
    expect(Date.now() - t0).toBeLessThan(2_000);

    fake.failures['/v1/organization/costs'] = Array.from({ length: 5 }, () => ({ status: 503 }));
    const err = await fetchOpenAIReport(api, '2026-03-01', '2026-03-02', { costByApiKey: false }).catch(
      (e: Error) => e,
    );
    expect((err as Error).message).toMatch(
      /\/organization\/costs still failing after 5 attempts \(HTTP 503: HTTP 503 from the fake\)/,
    );
  });

  it('408 is retried; Retry-After is honoured past the backoff cap, up to a bound; every request names meter', async () => {
    const fake = await startFakeAdminApi({ openaiKey: OPENAI_KEY, pageSize: 31 });
    fake.rows['/v1/organization/usage/completions'] = [];
    fake.rows['/v1/organization/usage/embeddings'] = [];
    fake.rows['/v1/organization/costs'] = [];
    // The backoff is capped at 50 ms here; the provider asks for 1 s: meter waits the 1 s.
    const api: AdminApi = { ...apis(fake.url).openai, retry: { firstDelayMs: 10, maxDelayMs: 50 } };
    fake.failures['/v1/organization/usage/completions'] = [{ status: 408 }, { status: 429, retryAfter: '1' }];
    const t0 = Date.now();
    await fetchOpenAIReport(api, '2026-03-01', '2026-03-02', { costByApiKey: false });
    expect(Date.now() - t0).toBeGreaterThanOrEqual(950);
    expect(fake.requests.filter((r) => r.path === '/v1/organization/usage/completions')).toHaveLength(3);
    for (const r of fake.requests) expect(r.headers['user-agent']).toMatch(/^meter\/\S+ \(usage reconciliation\)$/);

    // Asked to wait longer than the bound: the run fails at once, saying so.
    fake.failures['/v1/organization/costs'] = [{ status: 429, retryAfter: '3600' }];
    const t1 = Date.now();
    const err = await fetchOpenAIReport({ ...api, maxRetryAfterMs: 2_000 }, '2026-03-01', '2026-03-02', {
      costByApiKey: false,
    }).catch((e: Error) => e);
    expect(Date.now() - t1).toBeLessThan(2_000);
    expect((err as Error).message).toMatch(/asked to retry after 3600 s, longer than meter waits \(2 s\)/);
  });

  it('a 400 is not retried and says what the provider said', async () => {
    const fake = await startFakeAdminApi({ openaiKey: OPENAI_KEY });
    fake.rows['/v1/organization/usage/completions'] = [];
    fake.failures['/v1/organization/usage/completions'] = [
      { status: 400, body: { error: { message: 'invalid group_by' } } },
    ];
    const err = await fetchOpenAIReport(apis(fake.url).openai, '2026-03-01', '2026-03-02', {
      costByApiKey: false,
    }).catch((e: Error) => e);
    expect((err as Error).message).toBe('openai /organization/usage/completions answered HTTP 400: invalid group_by');
    expect(fake.requests).toHaveLength(1);
  });

  it('Retry-After: seconds or an HTTP date', () => {
    expect(retryAfterMs('3')).toBe(3000);
    expect(retryAfterMs(new Date(Date.UTC(2026, 0, 1, 0, 0, 10)).toUTCString(), Date.UTC(2026, 0, 1))).toBe(10_000);
    expect(retryAfterMs(undefined)).toBeUndefined();
  });
});
