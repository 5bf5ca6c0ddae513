import { beforeAll, describe, expect, it } from 'vitest';
import { createAccount } from '../../src/auth/accounts.js';
import { createKey } from '../../src/auth/keys.js';
import type { Daemon } from '../../src/server/daemon.js';
import { answerChat, eventually, startFullDaemon } from '../helpers/fleet.js';
import { createTestDatabase } from '../helpers/stores.js';
import { startFakeUpstream } from '../helpers/upstreams.js';

/**
 * Cross-account reads and SQL injection through every analytics parameter, cursor and tag
 * filter, against the real daemon on PostgreSQL: account A may see only A's calls, whatever it
 * sends; a bad value is a 400 naming the parameter; the tables stay as they were.
 */

let daemon: Daemon;
const keys: Record<'a' | 'b', string> = { a: '', b: '' };
const ids: Record<'a' | 'b', string[]> = { a: [], b: [] };
const B_SECRET = 'b-only-value';

const get = async (who: 'a' | 'b', path: string) => {
  const res = await fetch(`${daemon.url}${path}`, { headers: { authorization: `Bearer ${keys[who]}` } });
  const text = await res.text();
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- parsed JSON, read freely by the tests
  return { status: res.status, text, body: JSON.parse(text) as any };
};

beforeAll(async () => {
  const upstream = await startFakeUpstream();
  answerChat(upstream, { prompt: 1000, completion: 500 });
  daemon = await startFullDaemon(await createTestDatabase(), upstream);
  for (const who of ['a', 'b'] as const) {
    await createAccount(daemon.store, `acct-${who}`, 'pro');
    keys[who] = (await createKey(daemon.store, `acct-${who}`)).key;
    for (let i = 0; i < 3; i++) {
      const res = await fetch(`${daemon.url}/proxy/openai/v1/chat/completions`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${keys[who]}`,
          'x-metering-tags': `team=${who === 'b' ? B_SECRET : 'a-team'},env=prod`,
        },
        body: '{"model":"gpt-4o","messages":[]}',
      });
      expect(res.status).toBe(200);
      ids[who].push(res.headers.get('x-meter-request-id')!);
    }
  }
  await eventually(
    async () => (await daemon.store.query('SELECT 1 FROM usage_events')).length === 6,
    30_000,
    'six events stored',
  );
}, 120_000);

/** Nothing of account B in an answer to A. */
const noB = (text: string) => {
  expect(text).not.toContain(B_SECRET);
  for (const id of ids.b) expect(text).not.toContain(id);
};

describe('account A never reads account B', () => {
  it('events, summary, daily and by-tag count A’s calls only', async () => {
    const events = await get('a', '/analytics/events?limit=500');
    expect(events.status).toBe(200);
    expect(events.body.events.map((e: { id: string }) => e.id).sort()).toEqual([...ids.a].sort());
    const summary = await get('a', '/analytics/summary');
    expect(summary.body.requests).toBe(3);
    const daily = await get('a', '/analytics/daily?days=2'); // the calls may span midnight
    expect(daily.body.days.reduce((n: number, d: { requests: number }) => n + d.requests, 0)).toBe(3);
    const byTag = await get('a', '/analytics/by-tag?key=team');
    expect(byTag.body.groups.map((g: { value: string }) => g.value)).toEqual(['a-team']);
    for (const r of [events, summary, daily, byTag]) noB(r.text);
  });

  it('B’s tag value as a filter finds nothing; B’s cursor pages through A’s events only', async () => {
    const filtered = await get('a', `/analytics/events?tag=team:${B_SECRET}`);
    expect(filtered.status).toBe(200);
    expect(filtered.body.events).toEqual([]);

    const first = await get('b', '/analytics/events?limit=1');
    expect(first.body.events[0].id).toBe(ids.b.at(-1));
    const cursor = first.body.next_cursor as string;
    const withB = await get('a', `/analytics/events?limit=500&cursor=${encodeURIComponent(cursor)}`);
    expect([200, 400]).toContain(withB.status);
    if (withB.status === 200) for (const e of withB.body.events) expect(ids.a).toContain(e.id);
    noB(withB.text);
  });
});

const PAYLOADS = [
  "' OR '1'='1",
  '1; DROP TABLE usage_events; --',
  "') OR 1=1 --",
  '$1',
  'a%00b',
  '\\',
  '"',
  "team:x' OR ''='",
  'k:v,team:b-only-value',
  '1 UNION SELECT * FROM api_keys',
  `${'9'.repeat(40)}`,
  '-1',
  "2026-01-01' OR 1=1--",
];
const ROUTES: [string, string][] = [
  ['/analytics/daily', 'days'],
  ['/analytics/by-tag?key=team&', 'period'],
  ['/analytics/by-tag?', 'key'],
  ['/analytics/events?', 'limit'],
  ['/analytics/events?', 'cursor'],
  ['/analytics/events?', 'provider'],
  ['/analytics/events?', 'model'],
  ['/analytics/events?', 'tag'],
  ['/analytics/events?', 'from'],
  ['/analytics/events?', 'to'],
  ['/analytics/summary', 'x'],
];

describe('SQL injection in every parameter', () => {
  it.each(ROUTES)('%s %s: a 400 naming the parameter, or an answer about A only', async (route, param) => {
    const sep = route.endsWith('&') || route.endsWith('?') ? '' : '?';
    for (const payload of PAYLOADS) {
      const r = await get('a', `${route}${sep}${param}=${encodeURIComponent(payload)}`);
      expect([200, 400], `${param}=${payload}: ${r.text}`).toContain(r.status);
      if (r.status === 400) {
        expect(r.body.error.code).toBe('invalid_parameter');
        expect(r.body.error.message).toContain(param);
        for (const id of ids.b) expect(r.text).not.toContain(id); // it may echo what A sent, nothing of B's
      } else {
        for (const e of r.body.events ?? []) expect(ids.a).toContain(e.id);
        noB(r.text);
      }
    }
  });

  it('the tables are as they were', async () => {
    const [row] = await daemon.store.query<{ events: number; accounts: number; keys: number }>(
      'SELECT (SELECT count(*)::int FROM usage_events) AS events, (SELECT count(*)::int FROM accounts) AS accounts, (SELECT count(*)::int FROM api_keys) AS keys',
    );
    expect(row).toEqual({ events: 6, accounts: 2, keys: 2 });
  });
});
