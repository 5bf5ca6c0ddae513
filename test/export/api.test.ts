import { beforeAll, expect, it } from 'vitest';
import type { Db } from '../../src/store/types.js';
import { createAccount, FixedKeys, startApi, type TestAccount, type TestApi } from '../analytics/helpers/api.js';
import { makeEvent, seedEvents } from '../analytics/helpers/seed.js';
import { describeEachBackend } from '../helpers/stores.js';
import { parseCsv } from './csv.js';

const NOW = new Date('2026-05-14T15:30:00.000Z');

describeEachBackend('GET /analytics/export', (backend) => {
  let db: Db;
  let api: TestApi;
  let pro: TestAccount;
  let free: TestAccount;

  beforeAll(async () => {
    db = await backend.open();
    const auth = new FixedKeys();
    pro = await createAccount(db, auth, 'pro');
    free = await createAccount(db, auth, 'free');
    const other = await createAccount(db, auth, 'pro');
    api = await startApi(db, auth, NOW);
    const acct = pro.principal.accountId;
    await seedEvents(db, [
      makeEvent({
        accountId: acct,
        time: '2026-05-14T10:00:00.000Z',
        keyId: 'k1',
        provider: 'openai',
        model: 'gpt-4o',
        cost: '123456789012.30000001',
        inputTokens: 9007199254740991,
        cachedInputTokens: 7,
        tags: { team: 'search', env: 'prod' },
      }),
      makeEvent({
        accountId: acct,
        time: '2026-05-14T09:00:00.123456Z',
        keyId: 'k2',
        provider: 'anthropic',
        model: 'claude-sonnet-4',
        cost: '0.10000000',
        inputTokens: 10,
        outputTokens: 5,
        tags: { team: 'ads, "north"', feature: '=SUM(A1)' },
      }),
      makeEvent({
        accountId: acct,
        time: '2026-05-11T00:00:00.000Z',
        keyId: 'k1',
        provider: 'anthropic',
        model: 'claude-sonnet-4',
        cost: '0.20000000',
        inputTokens: 20,
        outputTokens: 7,
      }),
      // Last month: outside the default range.
      makeEvent({ accountId: acct, time: '2026-04-30T23:59:59.999Z', cost: '5.00000000' }),
      makeEvent({ accountId: other.principal.accountId, time: '2026-05-13T08:00:00.000Z', cost: '99.00000000' }),
    ]);
  });

  it('needs a key (401) and a plan that includes it (403 on Free)', async () => {
    expect((await api.get('/analytics/export?format=csv')).status).toBe(401);
    const r = await api.get('/analytics/export?format=csv', free.key);
    expect(r.status).toBe(403);
    expect(r.body.error.code).toBe('plan_required');
  });

  it('refuses bad parameters with 400 invalid_parameter naming the parameter', async () => {
    const cases: [string, RegExp][] = [
      ['', /format is required: one of csv, jsonl, focus/],
      ['format=xlsx', /format must be one of csv, jsonl, focus, got "xlsx"/],
      ['format=csv&from=2026-02-30', /from must be a UTC date YYYY-MM-DD/],
      ['format=csv&from=2026-05-10&to=2026-05-10', /to must be later than from/],
      ['format=csv&group_by=week', /group_by must be day, model or tag:<key>/],
      ['format=focus&group_by=day', /group_by does not apply to focus/],
      ['format=csv&limit=5', /unknown parameter "limit": this endpoint takes from, to, format, group_by/],
      ['format=csv&format=csv', /format is given more than once/],
    ];
    for (const [q, message] of cases) {
      const r = await api.get(`/analytics/export?${q}`, pro.key);
      expect(r.status, q).toBe(400);
      expect(r.body.error.code).toBe('invalid_parameter');
      expect(r.body.error.message).toMatch(message);
    }
  });

  it('raw CSV: header with one tag: column per key, RFC 4180 quoting, exact money, UTC times, oldest first', async () => {
    const r = await api.get('/analytics/export?format=csv', pro.key);
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toMatch(/^text\/csv/);
    expect(r.headers.get('content-disposition')).toBe(
      `attachment; filename="meter-${pro.principal.accountName}-2026-05-01-2026-06-01.csv"`,
    );
    expect(r.text.split('\r\n')).toEqual([
      'time,provider,model,key_id,status,input_tokens,cached_input_tokens,output_tokens,cost,usage_source,tag:env,tag:feature,tag:team',
      '2026-05-11T00:00:00.000Z,anthropic,claude-sonnet-4,k1,200,20,0,7,0.20000000,provider,,,',
      `2026-05-14T09:00:00.123456Z,anthropic,claude-sonnet-4,k2,200,10,0,5,0.10000000,provider,,'=SUM(A1),"ads, ""north"""`,
      '2026-05-14T10:00:00.000Z,openai,gpt-4o,k1,200,9007199254740991,7,20,123456789012.30000001,provider,prod,,search',
      '',
    ]);
    expect(parseCsv(r.text)[2]![12]).toBe('ads, "north"');
  });

  it('raw JSONL: one object per line, tags as an object, counts as exact digits, money as 8-decimal strings', async () => {
    const r = await api.get('/analytics/export?format=jsonl&from=2026-05-14&to=2026-05-15', pro.key);
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toMatch(/^application\/x-ndjson/);
    const lines = r.text.trimEnd().split('\n');
    expect(lines).toHaveLength(2);
    expect(lines[1]).toBe(
      '{"time":"2026-05-14T10:00:00.000Z","provider":"openai","model":"gpt-4o","key_id":"k1","status":200,' +
        '"input_tokens":9007199254740991,"cached_input_tokens":7,"output_tokens":20,"cost":"123456789012.30000001",' +
        '"usage_source":"provider","tags":{"env":"prod","team":"search"}}',
    );
    expect(JSON.parse(lines[0]!).tags).toEqual({ team: 'ads, "north"', feature: '=SUM(A1)' });
  });

  it('grouped by day, by model and by tag: the group columns, then requests, tokens and cost', async () => {
    const day = await api.get('/analytics/export?format=csv&group_by=day', pro.key);
    expect(day.text.split('\r\n')).toEqual([
      'day,requests,input_tokens,output_tokens,cost',
      '2026-05-11,1,20,7,0.20000000',
      '2026-05-14,2,9007199254741001,25,123456789012.40000001',
      '',
    ]);
    const model = await api.get('/analytics/export?format=csv&group_by=model', pro.key);
    expect(model.text.split('\r\n')).toEqual([
      'provider,model,requests,input_tokens,output_tokens,cost',
      'anthropic,claude-sonnet-4,2,30,12,0.30000000',
      'openai,gpt-4o,1,9007199254740991,20,123456789012.30000001',
      '',
    ]);
    const tag = await api.get('/analytics/export?format=jsonl&group_by=tag:team', pro.key);
    expect(tag.text.trimEnd().split('\n')).toEqual([
      '{"tag:team":"ads, \\"north\\"","requests":1,"input_tokens":10,"output_tokens":5,"cost":"0.10000000"}',
      '{"tag:team":"search","requests":1,"input_tokens":9007199254740991,"output_tokens":20,"cost":"123456789012.30000001"}',
      '{"tag:team":null,"requests":1,"input_tokens":20,"output_tokens":7,"cost":"0.20000000"}',
    ]);
    const csvTag = await api.get('/analytics/export?format=csv&group_by=tag:team', pro.key);
    expect(csvTag.text.split('\r\n')[3]).toBe(',1,20,7,0.20000000'); // untagged: an empty value
  });
});
