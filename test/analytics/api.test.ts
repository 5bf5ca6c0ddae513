import { beforeAll, expect, it } from 'vitest';
import type { Db } from '../../src/store/types.js';
import { describeEachBackend } from '../helpers/stores.js';
import { createAccount, FixedKeys, startApi, type TestAccount, type TestApi } from './helpers/api.js';
import { makeEvent, seedEvents } from './helpers/seed.js';

// Thursday, 14 May 2026: week from Monday 11 May, month May, quarter April–June.
const NOW = new Date('2026-05-14T15:30:00.000Z');

describeEachBackend('analytics API', (backend) => {
  let db: Db;
  let api: TestApi;
  let pro: TestAccount;
  let free: TestAccount;
  let other: TestAccount;
  let empty: TestAccount;

  beforeAll(async () => {
    db = await backend.open();
    const auth = new FixedKeys();
    [pro, free, other, empty] = [
      await createAccount(db, auth, 'pro'),
      await createAccount(db, auth, 'free'),
      await createAccount(db, auth, 'pro'),
      await createAccount(db, auth, 'pro'),
    ];
    api = await startApi(db, auth, NOW);
    const acct = pro.principal.accountId;
    await seedEvents(db, [
      makeEvent({
        accountId: acct,
        time: '2026-05-14T10:00:00.000Z',
        provider: 'openai',
        model: 'gpt-4o',
        cost: '123456789012.30000001',
        inputTokens: 9007199254740991,
        tags: { team: 'search', env: 'prod' },
      }),
      makeEvent({
        accountId: acct,
        time: '2026-05-14T09:00:00.123456Z',
        provider: 'anthropic',
        model: 'claude-sonnet-4',
        cost: '0.10000000',
        inputTokens: 10,
        outputTokens: 5,
        tags: { team: 'ads' },
      }),
      makeEvent({
        accountId: acct,
        time: '2026-05-11T00:00:00.000Z',
        provider: 'anthropic',
        model: 'claude-sonnet-4',
        cost: '0.20000000',
        inputTokens: 20,
        outputTokens: 7,
      }),
      // Sunday before this ISO week, still this month.
      makeEvent({
        accountId: acct,
        time: '2026-05-10T23:59:59.999Z',
        provider: 'groq',
        model: 'llama-3.3-70b',
        cost: '0.05000000',
        tags: { team: 'search' },
      }),
      // Last quarter: only in daily.
      makeEvent({
        accountId: acct,
        time: '2026-03-31T12:00:00.000Z',
        provider: 'openai',
        model: 'gpt-4o',
        cost: '1.00000000',
      }),
      makeEvent({
        accountId: acct,
        time: '2026-05-12T08:00:00.000Z',
        provider: 'openai',
        model: 'gpt-4o-mini',
        cost: '0',
        usageSource: 'none',
        status: 500,
      }),
      makeEvent({
        accountId: other.principal.accountId,
        time: '2026-05-13T08:00:00.000Z',
        cost: '99.00000000',
        tags: { team: 'search' },
      }),
    ]);
  });

  it('refuses a missing or unknown key with 401 invalid_api_key on every route', async () => {
    for (const path of ['/analytics/daily', '/analytics/events', '/analytics/nope']) {
      for (const key of [undefined, 'mk_000000000000_wrong']) {
        const r = await api.get(path, key);
        expect(r.status).toBe(401);
        expect(r.body.error).toMatchObject({ type: 'authentication_error', code: 'invalid_api_key' });
      }
    }
  });

  it('answers an unknown route 404 not_found and another method 405 with Allow: GET', async () => {
    const r = await api.get('/analytics/monthly', pro.key);
    expect(r.status).toBe(404);
    expect(r.body.error.code).toBe('not_found');
    expect(r.body.error.message).toContain('/analytics/daily');
    const p = await api.get('/analytics/daily', pro.key, { method: 'POST' });
    expect(p.status).toBe(405);
    expect(p.headers.get('allow')).toBe('GET');
    expect(p.body.error).toMatchObject({ type: 'invalid_request_error', code: 'method_not_allowed' });
  });

  it('gates endpoints by plan: free has summary and daily, not by-tag or events (403 plan_required)', async () => {
    expect((await api.get('/analytics/daily', free.key)).status).toBe(200);
    expect((await api.get('/analytics/summary', free.key)).status).toBe(200);
    for (const path of ['/analytics/by-tag?key=team', '/analytics/events']) {
      const r = await api.get(path, free.key);
      expect(r.status).toBe(403);
      expect(r.body.error).toMatchObject({ type: 'permission_error', code: 'plan_required' });
      expect(r.body.error.message).toMatch(/free plan does not include/);
    }
  });

  it('daily: the window ends today (UTC), oldest first, zero days included', async () => {
    const r = await api.get('/analytics/daily?days=5', pro.key);
    expect(r.status).toBe(200);
    expect(r.body).toEqual({
      days: [
        { date: '2026-05-10', spend: '0.05', requests: '1' },
        { date: '2026-05-11', spend: '0.2', requests: '1' },
        { date: '2026-05-12', spend: '0', requests: '1' },
        { date: '2026-05-13', spend: '0', requests: '0' },
        { date: '2026-05-14', spend: '123456789012.40000001', requests: '2' },
      ],
    });
    // Money and counts are JSON numbers written from the exact decimals.
    expect(r.text).toContain('"spend":123456789012.40000001,');
    expect(r.text).toContain('{"date":"2026-05-13","spend":0,"requests":0}');
    const d = await api.get('/analytics/daily', pro.key);
    expect(d.body.days).toHaveLength(30);
    expect(d.body.days[0].date).toBe('2026-04-15');
    const one = await api.get('/analytics/daily?days=1', pro.key);
    expect(one.body.days).toEqual([{ date: '2026-05-14', spend: '123456789012.40000001', requests: '2' }]);
    const ninety = await api.get('/analytics/daily?days=90', pro.key);
    expect(ninety.body.days).toHaveLength(90);
    expect(ninety.body.days.find((x: { date: string }) => x.date === '2026-03-31')).toEqual({
      date: '2026-03-31',
      spend: '1',
      requests: '1',
    });
  });

  it('daily for an account without calls: every day zero', async () => {
    const r = await api.get('/analytics/daily?days=7', empty.key);
    expect(r.body.days).toHaveLength(7);
    expect(r.body.days.every((d: { spend: string; requests: string }) => d.spend === '0' && d.requests === '0')).toBe(
      true,
    );
  });

  it('summary: this month, by_model by spend descending, budget null and hard_cap false without a budget', async () => {
    const r = await api.get('/analytics/summary', pro.key);
    expect(r.status).toBe(200);
    expect(r.body).toEqual({
      month: '2026-05',
      spend: '123456789012.65000001',
      requests: '5',
      unpriced_requests: '0',
      budget: null,
      budget_utilization_pct: null,
      hard_cap: false,
      by_model: [
        {
          provider: 'openai',
          model: 'gpt-4o',
          spend: '123456789012.30000001',
          requests: '1',
          input_tokens: '9007199254740991',
          output_tokens: '20',
        },
        {
          provider: 'anthropic',
          model: 'claude-sonnet-4',
          spend: '0.3',
          requests: '2',
          input_tokens: '30',
          output_tokens: '12',
        },
        {
          provider: 'groq',
          model: 'llama-3.3-70b',
          spend: '0.05',
          requests: '1',
          input_tokens: '100',
          output_tokens: '20',
        },
        {
          provider: 'openai',
          model: 'gpt-4o-mini',
          spend: '0',
          requests: '1',
          input_tokens: '100',
          output_tokens: '20',
        },
      ],
    });
    expect(r.text).toContain('"input_tokens":9007199254740991');
    const e = await api.get('/analytics/summary', empty.key);
    expect(e.body).toMatchObject({ month: '2026-05', spend: '0', requests: '0', by_model: [] });
  });

  it('by-tag: the current week, month and quarter, untagged calls under value null', async () => {
    const week = await api.get('/analytics/by-tag?key=team&period=week', pro.key);
    expect(week.status).toBe(200);
    expect(week.body).toEqual({
      key: 'team',
      period: 'week',
      from: '2026-05-11',
      to: '2026-05-18',
      groups: [
        { value: 'search', spend: '123456789012.30000001', requests: '1' },
        { value: null, spend: '0.2', requests: '2' },
        { value: 'ads', spend: '0.1', requests: '1' },
      ],
    });
    expect(week.text).toContain('{"value":null,"spend":0.2,"requests":2}');
    const month = await api.get('/analytics/by-tag?key=team', pro.key);
    expect(month.body).toMatchObject({ period: 'month', from: '2026-05-01', to: '2026-06-01' });
    expect(month.body.groups[0]).toEqual({ value: 'search', spend: '123456789012.35000001', requests: '2' });
    const quarter = await api.get('/analytics/by-tag?key=env&period=quarter', pro.key);
    expect(quarter.body).toEqual({
      key: 'env',
      period: 'quarter',
      from: '2026-04-01',
      to: '2026-07-01',
      groups: [
        { value: 'prod', spend: '123456789012.30000001', requests: '1' },
        { value: null, spend: '0.35', requests: '4' },
      ],
    });
    const none = await api.get('/analytics/by-tag?key=team', empty.key);
    expect(none.body.groups).toEqual([]);
  });

  it('events: newest first, exactly the contract fields, exact money and times in ISO 8601 UTC', async () => {
    const r = await api.get('/analytics/events', pro.key);
    expect(r.status).toBe(200);
    expect(r.body.next_cursor).toBeNull();
    expect(r.body.events.map((e: { time: string }) => e.time)).toEqual([
      '2026-05-14T10:00:00.000Z',
      '2026-05-14T09:00:00.123456Z',
      '2026-05-12T08:00:00.000Z',
      '2026-05-11T00:00:00.000Z',
      '2026-05-10T23:59:59.999Z',
      '2026-03-31T12:00:00.000Z',
    ]);
    const first = r.body.events[0];
    expect(Object.keys(first).sort()).toEqual([
      'cache_write_tokens',
      'cached_input_tokens',
      'cost',
      'id',
      'input_tokens',
      'key_id',
      'latency_ms',
      'model',
      'output_tokens',
      'price_version',
      'provider',
      'reasoning_tokens',
      'requested_model',
      'service_tier',
      'status',
      'stream',
      'tags',
      'time',
      'ttfb_ms',
      'units',
      'usage_source',
    ]);
    expect(first).toMatchObject({
      provider: 'openai',
      model: 'gpt-4o',
      status: '200',
      input_tokens: '9007199254740991',
      cost: '123456789012.30000001',
      usage_source: 'provider',
      latency_ms: '123.5',
      ttfb_ms: '45.25',
      stream: false,
      tags: { team: 'search', env: 'prod' },
      price_version: 'genai-prices@0.1.8',
      requested_model: 'gpt-4o-mini',
      service_tier: null,
      units: {},
    });
    expect(r.text).toContain('"cost":123456789012.30000001,');
    expect(r.body.events[2]).toMatchObject({ status: '500', usage_source: 'none', cost: '0', tags: {} });
  });

  it('events: filters by provider, model, tag and time range (from inclusive, to exclusive)', async () => {
    const ids = async (q: string) =>
      ((await api.get(`/analytics/events?${q}`, pro.key)).body.events as { time: string }[]).map((e) => e.time);
    expect(await ids('provider=anthropic')).toEqual(['2026-05-14T09:00:00.123456Z', '2026-05-11T00:00:00.000Z']);
    expect(await ids('model=gpt-4o')).toEqual(['2026-05-14T10:00:00.000Z', '2026-03-31T12:00:00.000Z']);
    expect(await ids('tag=team:search')).toEqual(['2026-05-14T10:00:00.000Z', '2026-05-10T23:59:59.999Z']);
    expect(await ids('tag=team:search&provider=groq')).toEqual(['2026-05-10T23:59:59.999Z']);
    expect(await ids('from=2026-05-11&to=2026-05-14')).toEqual([
      '2026-05-12T08:00:00.000Z',
      '2026-05-11T00:00:00.000Z',
    ]);
    expect(await ids('from=2026-05-14T09:00:00.123456Z&to=2026-05-14T10:00:00Z')).toEqual([
      '2026-05-14T09:00:00.123456Z',
    ]);
    expect(await ids('from=2026-05-14T11:00:00%2B02:00')).toEqual([
      '2026-05-14T10:00:00.000Z',
      '2026-05-14T09:00:00.123456Z',
    ]);
    expect(await ids('tag=team:nobody')).toEqual([]);
  });

  it("isolation: one account's key sees none of another account's data", async () => {
    const daily = await api.get('/analytics/daily?days=90', other.key);
    const spent = daily.body.days.filter((d: { spend: string }) => d.spend !== '0');
    expect(spent).toEqual([{ date: '2026-05-13', spend: '99', requests: '1' }]);
    const summary = await api.get('/analytics/summary', other.key);
    expect(summary.body).toMatchObject({ spend: '99', requests: '1' });
    expect(summary.body.by_model).toEqual([
      {
        provider: 'openai',
        model: 'gpt-4o-mini',
        spend: '99',
        requests: '1',
        input_tokens: '100',
        output_tokens: '20',
      },
    ]);
    const tags = await api.get('/analytics/by-tag?key=team&period=quarter', other.key);
    expect(tags.body.groups).toEqual([{ value: 'search', spend: '99', requests: '1' }]);
    const events = await api.get('/analytics/events?limit=500', other.key);
    expect(events.body.events.map((e: { cost: string }) => e.cost)).toEqual(['99']);
    for (const q of ['provider=anthropic', 'model=gpt-4o', 'tag=env:prod', 'from=2026-01-01']) {
      const r = await api.get(`/analytics/events?${q}`, other.key);
      expect(r.body.events.every((e: { cost: string }) => e.cost === '99')).toBe(true);
    }
    // Another account's cursor walks only the caller's own events.
    const page = await api.get('/analytics/events?limit=1', pro.key);
    const foreign = await api.get(`/analytics/events?cursor=${page.body.next_cursor}`, other.key);
    expect(foreign.body.events.map((e: { cost: string }) => e.cost)).toEqual(['99']);
  });
});
