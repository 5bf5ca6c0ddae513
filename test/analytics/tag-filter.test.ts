/**
 * events?tag=: the rollups pick how rows are found (none / scan / lookup, tag-filter.ts); each
 * way must list exactly the caller's matching events.
 */
import { beforeAll, expect, it } from 'vitest';
import { chooseTagStrategy } from '../../src/analytics/tag-filter.js';
import type { UsageEvent } from '../../src/metering/event.js';
import type { Db } from '../../src/store/types.js';
import { describeEachBackend } from '../helpers/stores.js';
import { createAccount, FixedKeys, startApi, type TestAccount, type TestApi } from './helpers/api.js';
import { makeEvent, seedEvents } from './helpers/seed.js';

describeEachBackend('analytics events tag filter', (backend) => {
  let db: Db;
  let api: TestApi;
  let mine: TestAccount;
  let theirs: TestAccount;
  let events: UsageEvent[];

  beforeAll(async () => {
    db = await backend.open();
    const auth = new FixedKeys();
    mine = await createAccount(db, auth, 'pro');
    theirs = await createAccount(db, auth, 'pro');
    events = [];
    for (let i = 0; i < 400; i++) {
      const time = new Date(Date.parse('2026-05-01T00:00:00Z') + i * 3_600_000).toISOString();
      // Mine: env on every call, one rare feature; theirs: the rare feature everywhere.
      events.push(
        makeEvent({
          accountId: mine.principal.accountId,
          time,
          tags: i % 97 === 0 ? { env: 'prod', feature: 'rare' } : { env: 'prod' },
        }),
      );
      events.push(
        makeEvent({ accountId: theirs.principal.accountId, time, tags: { feature: 'rare', only: 'theirs' } }),
      );
    }
    await seedEvents(db, events);
    api = await startApi(db, auth, new Date('2026-05-20T00:00:00Z'));
  });

  const listed = async (account: TestAccount, query: string) => {
    const ids: string[] = [];
    let cursor: string | null = null;
    do {
      const r = await api.get(`/analytics/events?limit=20&${query}${cursor ? `&cursor=${cursor}` : ''}`, account.key);
      expect(r.status).toBe(200);
      ids.push(...r.body.events.map((e: { id: string }) => e.id));
      cursor = r.body.next_cursor;
    } while (cursor);
    return ids;
  };
  const expected = (account: TestAccount, key: string, value: string) =>
    events
      .filter((e) => e.accountId === account.principal.accountId && e.tags[key] === value)
      .sort((a, b) => (a.time === b.time ? (a.id < b.id ? 1 : -1) : a.time < b.time ? 1 : -1))
      .map((e) => e.id);

  it('chooses from the rollups: none, scan for a common tag, lookup for a rare one', async () => {
    const id = mine.principal.accountId;
    expect(await chooseTagStrategy(db, id, { key: 'only', value: 'theirs' }, {}, 50)).toBe('none');
    expect(await chooseTagStrategy(db, id, { key: 'env', value: 'prod' }, {}, 50)).toBe('scan');
    expect(await chooseTagStrategy(db, id, { key: 'feature', value: 'rare' }, {}, 50)).toBe('lookup');
    expect(await chooseTagStrategy(db, id, { key: 'env', value: 'prod' }, { fromDay: '2026-06-01' }, 50)).toBe('none');
  });

  it('lists exactly the matching events of the caller, whichever way they are found', async () => {
    expect(await listed(mine, 'tag=env:prod')).toEqual(expected(mine, 'env', 'prod'));
    expect(await listed(mine, 'tag=feature:rare')).toEqual(expected(mine, 'feature', 'rare'));
    expect(await listed(mine, 'tag=only:theirs')).toEqual([]);
    expect(await listed(theirs, 'tag=feature:rare')).toEqual(expected(theirs, 'feature', 'rare'));
    expect(await listed(mine, 'tag=feature:rare&from=2026-05-05&to=2026-05-14T12:00:00%2B02:00')).toEqual(
      expected(mine, 'feature', 'rare').filter((id) => {
        const t = events.find((e) => e.id === id)!.time;
        return t >= '2026-05-05' && t < '2026-05-14T10:00:00.000Z';
      }),
    );
  });

  it("values past the writer's per-day cap (the overflow row) still find their events", async () => {
    // A value the rollups only know as overflow: the events exist, the tag row does not.
    const [extra] = [
      makeEvent({
        accountId: mine.principal.accountId,
        time: '2026-05-19T00:00:00Z',
        tags: { env: 'prod', big: 'v-1001' },
      }),
    ];
    await seedEvents(db, [extra!]);
    await db.query(`UPDATE usage_tag_daily SET tag_value = '' WHERE account_id = $1 AND tag_key = 'big'`, [
      mine.principal.accountId,
    ]);
    expect(await listed(mine, 'tag=big:v-1001')).toEqual([extra!.id]);
  });
});
