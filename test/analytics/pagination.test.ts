/**
 * events keyset pagination: walking every page while other calls are being recorded (new ones,
 * late ones with older times, ones sharing a timestamp) never repeats an event and never skips
 * one that existed when the walk began.
 */
import { randomUUID } from 'node:crypto';
import { beforeAll, expect, it } from 'vitest';
import type { UsageEvent } from '../../src/metering/event.js';
import type { Db } from '../../src/store/types.js';
import { describeEachBackend } from '../helpers/stores.js';
import { createAccount, FixedKeys, startApi, type TestAccount, type TestApi } from './helpers/api.js';
import { makeEvent, seedEvents } from './helpers/seed.js';

const TIE = '2026-05-10T12:00:00.000000Z';
/** An ISO time `offsetUs` microseconds after `baseMs`, written with all six digits. */
function micros(baseMs: number, offsetUs: number): string {
  const total = BigInt(baseMs) * 1000n + BigInt(offsetUs);
  const seconds = new Date(Number(total / 1_000_000n) * 1000).toISOString().slice(0, 19);
  return `${seconds}.${(total % 1_000_000n).toString().padStart(6, '0')}Z`;
}

interface Listed {
  id: string;
  time: string;
  tags: Record<string, string>;
}
/** Microsecond text, so times compare as strings in time order. */
const fine = (t: string) => t.replace(/\.(\d{3})Z$/, '.$1000Z');

describeEachBackend('analytics events pagination', (backend) => {
  let db: Db;
  let api: TestApi;
  let acct: TestAccount;
  let initial: UsageEvent[];

  beforeAll(async () => {
    db = await backend.open();
    const auth = new FixedKeys();
    acct = await createAccount(db, auth, 'pro');
    const base = Date.parse('2026-05-01T00:00:00Z');
    initial = [];
    for (let i = 0; i < 400; i++) {
      // Microsecond steps: neighbours differ below a millisecond.
      initial.push(
        makeEvent({
          accountId: acct.principal.accountId,
          time: micros(base, i * 997_001 + (i % 7)),
          tags: { half: String(i % 2) },
        }),
      );
    }
    for (let i = 0; i < 150; i++)
      initial.push(makeEvent({ accountId: acct.principal.accountId, time: TIE, tags: { half: String(i % 2) } }));
    await seedEvents(db, initial);
    api = await startApi(db, auth, new Date('2026-05-14T00:00:00Z'));
  });

  async function walk(query: string, limit: number, afterFirstPage = () => {}): Promise<Listed[]> {
    const seen: Listed[] = [];
    let cursor: string | null = null;
    do {
      const r = await api.get(`/analytics/events?limit=${limit}${query}${cursor ? `&cursor=${cursor}` : ''}`, acct.key);
      expect(r.status).toBe(200);
      expect(r.body.events.length).toBeLessThanOrEqual(limit);
      if (!seen.length) afterFirstPage();
      seen.push(...r.body.events);
      cursor = r.body.next_cursor;
    } while (cursor);
    return seen;
  }

  function expectStrictlyNewestFirst(seen: Listed[]) {
    for (let i = 1; i < seen.length; i++) {
      const [a, b] = [seen[i - 1]!, seen[i]!];
      const before = fine(a.time) > fine(b.time) || (fine(a.time) === fine(b.time) && a.id > b.id);
      expect(before, `${a.time} ${a.id} then ${b.time} ${b.id}`).toBe(true);
    }
  }

  it('walks every page during concurrent inserts: no duplicates, no gaps, newest first', async () => {
    let done = false;
    const inserted: UsageEvent[] = [];
    let started!: () => void;
    const firstPage = new Promise<void>((resolve) => (started = resolve));
    const writer = (async () => {
      await firstPage;
      let n = 0;
      while (!done) {
        const batch = [
          makeEvent({
            accountId: acct.principal.accountId,
            time: new Date(Date.parse('2026-05-13T00:00:00Z') + n).toISOString(),
          }),
          makeEvent({
            accountId: acct.principal.accountId,
            time: micros(Date.parse('2026-05-01T00:00:00Z'), (n * 7919 + 13) % 399_000_000),
          }),
          makeEvent({ accountId: acct.principal.accountId, time: TIE, id: randomUUID() }),
        ];
        inserted.push(...batch);
        await seedEvents(db, batch);
        n++;
      }
    })();
    let seen: Listed[];
    try {
      seen = await walk('', 7, started);
    } finally {
      started();
      done = true;
      await writer;
    }
    expect(inserted.length).toBeGreaterThan(0);
    const ids = seen.map((e) => e.id);
    expect(new Set(ids).size).toBe(ids.length);
    const seenIds = new Set(ids);
    expect(initial.filter((e) => !seenIds.has(e.id))).toEqual([]);
    expectStrictlyNewestFirst(seen);
    // Calls recorded after the first page are newer than it: none of them shows up.
    const newer = new Set(inserted.filter((e) => e.time.startsWith('2026-05-13')).map((e) => e.id));
    expect(ids.filter((id) => newer.has(id))).toEqual([]);
  });

  it('pages with a filter and across a run of identical timestamps', async () => {
    const seen = await walk('&tag=half:1&to=2026-05-11', 10);
    const expected = initial
      .filter((e) => e.tags.half === '1')
      .map((e) => e.id)
      .sort();
    expect(seen.every((e) => e.tags.half === '1')).toBe(true);
    expectStrictlyNewestFirst(seen);
    expect(seen.map((e) => e.id).sort()).toEqual(expected);
    const ties = await walk(`&from=${TIE}&to=2026-05-10T12:00:00.000001Z`, 500);
    expect(ties.length).toBeGreaterThanOrEqual(150);
    expectStrictlyNewestFirst(ties);
  });

  it('the last page says next_cursor null; limit defaults to 50', async () => {
    const first = await api.get('/analytics/events', acct.key);
    expect(first.body.events).toHaveLength(50);
    expect(typeof first.body.next_cursor).toBe('string');
    const tail = await api.get(
      '/analytics/events?from=2026-05-01T00:00:00Z&to=2026-05-01T00:00:00.000010Z&limit=1',
      acct.key,
    );
    expect(tail.body.events).toHaveLength(1);
    expect(tail.body.next_cursor).toBeNull();
  });
});
