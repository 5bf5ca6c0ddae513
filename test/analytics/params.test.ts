import { beforeAll, expect, it } from 'vitest';
import { describeEachBackend } from '../helpers/stores.js';
import { createAccount, FixedKeys, startApi, type TestAccount, type TestApi } from './helpers/api.js';

describeEachBackend('analytics parameters', (backend) => {
  let api: TestApi;
  let acct: TestAccount;

  beforeAll(async () => {
    const db = await backend.open();
    const auth = new FixedKeys();
    acct = await createAccount(db, auth, 'pro');
    api = await startApi(db, auth, new Date('2026-05-14T12:00:00Z'));
  });

  // [query, the parameter the message must name, words the message must contain]
  const bad: [string, string, string][] = [
    ['/analytics/daily?days=0', 'days', 'integer from 1 to 90'],
    ['/analytics/daily?days=91', 'days', 'integer from 1 to 90'],
    ['/analytics/daily?days=1.5', 'days', 'integer from 1 to 90'],
    ['/analytics/daily?days=1e1', 'days', 'integer from 1 to 90'],
    ['/analytics/daily?days=abc', 'days', 'integer from 1 to 90'],
    ['/analytics/daily?days=', 'days', 'integer from 1 to 90'],
    ['/analytics/daily?days=-3', 'days', 'integer from 1 to 90'],
    ['/analytics/daily?days=7&days=8', 'days', 'more than once'],
    ['/analytics/daily?day=7', 'day', 'this endpoint takes days'],
    ['/analytics/summary?month=2026-04', 'month', 'takes no parameters'],
    ['/analytics/by-tag', 'key', 'key is required'],
    ['/analytics/by-tag?key=te%20am', 'key', '1-64 characters'],
    ['/analytics/by-tag?key=team&period=year', 'period', 'week, month, quarter'],
    ['/analytics/events?limit=0', 'limit', 'integer from 1 to 500'],
    ['/analytics/events?limit=501', 'limit', 'integer from 1 to 500'],
    ['/analytics/events?cursor=not-a-cursor', 'cursor', 'next_cursor'],
    [
      '/analytics/events?cursor=' + Buffer.from('2026-05-14T00:00:00Z|x').toString('base64url'),
      'cursor',
      'next_cursor',
    ],
    ['/analytics/events?provider=bard', 'provider', 'openai, anthropic'],
    ['/analytics/events?model=', 'model', 'must not be empty'],
    ['/analytics/events?tag=team', 'tag', 'k:v'],
    ['/analytics/events?tag=:search', 'tag', 'k:v'],
    ['/analytics/events?tag=team:', 'tag', 'k:v'],
    ['/analytics/events?from=2026-02-30', 'from', 'ISO 8601'],
    ['/analytics/events?from=yesterday', 'from', 'ISO 8601'],
    ['/analytics/events?to=2026-05-14T25:00:00Z', 'to', 'ISO 8601'],
    ['/analytics/events?from=2026-05-14&to=2026-05-01', 'to', 'later than from'],
    ['/analytics/events?from=2026-05-14T00:00:00.000001Z&to=2026-05-14T00:00:00.000001Z', 'to', 'later than from'],
    ['/analytics/events?offset=50', 'offset', 'limit, cursor, provider, model, tag, from, to'],
  ];

  it.each(bad)('%s: 400 invalid_parameter naming %s', async (path, param, words) => {
    const r = await api.get(path, acct.key);
    expect(r.status).toBe(400);
    expect(r.body.error).toMatchObject({ type: 'invalid_request_error', code: 'invalid_parameter' });
    expect(r.body.error.message).toContain(param);
    expect(r.body.error.message).toContain(words);
  });

  it('accepts the edges of every range and the documented defaults', async () => {
    for (const path of [
      '/analytics/daily?days=1',
      '/analytics/daily?days=90',
      '/analytics/by-tag?key=team&period=week',
      '/analytics/by-tag?key=a.b-c_d&period=quarter',
      '/analytics/events?limit=1',
      '/analytics/events?limit=500',
      '/analytics/events?tag=team:a:b',
      '/analytics/events?from=2026-05-01T00:00&to=2026-05-14T12:00:00.123456-05:00',
    ]) {
      expect((await api.get(path, acct.key)).status, path).toBe(200);
    }
    expect((await api.get('/analytics/by-tag?key=team', acct.key)).body.period).toBe('month');
  });
});
