/**
 * TimescaleDB mode reading compressed chunks (test/helpers/timescale.ts, the real engine): the
 * summary's unpriced count where calls are their own segments (sql/140), tagged events through
 * the tag table (sql/110), and the other listings in time windows (src/analytics/events-query.ts).
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { decodeCursor } from '../../src/analytics/cursor.js';
import { listEvents } from '../../src/analytics/events-query.js';
import { summary } from '../../src/analytics/rollup-queries.js';
import type { UsageEvent } from '../../src/metering/event.js';
import { runRetention } from '../../src/plans/retention.js';
import { insertBatch } from '../../src/store/event-batch.js';
import type { Db } from '../../src/store/types.js';
import { timescaleBackend } from '../helpers/stores.js';
import { account, ev } from '../helpers/timescale-fixtures.js';

const DAY = 86_400_000;
const now = Date.now();

describe('TimescaleDB mode: compressed chunks', () => {
  let db: Db;
  beforeAll(async () => {
    db = await timescaleBackend.open();
  }, 120_000);

  it('the summary counts unpriced calls in compressed chunks (their own segments), and repricing one there', async () => {
    const acct = await account(db, 'pro');
    const at = Date.parse('2026-03-25T12:00:00Z'); // a month's day more than 7 days after its start
    const unpriced = (t: number) => ({ ...ev(acct, t, '0'), unpriced: true });
    const first = unpriced(Date.parse('2026-03-05T10:00:00Z'));
    await insertBatch(db, [
      first,
      unpriced(Date.parse('2026-03-05T11:00:00Z')),
      ev(acct, Date.parse('2026-03-05T12:00:00Z')),
    ]);
    await runRetention(db, { now: at });
    const [chunk] = await db.query<{ compressed: boolean }>(
      `SELECT is_compressed AS compressed FROM timescaledb_information.chunks
        WHERE hypertable_name = 'usage_events' AND range_start = '2026-03-05T00:00:00Z'`,
    );
    expect(chunk?.compressed).toBe(true);
    expect(await summary(db, acct, new Date(at))).toMatchObject({
      requests: { text: '3' },
      unpriced_requests: { text: '2' },
    });
    await db.query(`UPDATE usage_events SET unpriced = false, cost = 1 WHERE event_id = $1`, [first.id]);
    expect(await summary(db, acct, new Date(at))).toMatchObject({ unpriced_requests: { text: '1' } });
  });

  it('events?tag=k:v reads compressed chunks through the tag table: the same pages as the raw events, replays add nothing', async () => {
    const acct = await account(db, 'pro');
    const other = await account(db, 'pro');
    const events: UsageEvent[] = [];
    for (let d = 1; d <= 30; d++) {
      const t = now - d * DAY;
      events.push(ev(acct, t, '0.1', { team: 'a', ...(d % 4 === 0 ? { job: 'nightly' } : {}) }));
      events.push({ ...ev(acct, t + 1, '0.2', { team: d % 2 ? 'a' : 'b' }), provider: 'anthropic' });
      events.push(ev(other, t, '0.3', { job: 'nightly' }));
    }
    expect(await insertBatch(db, events)).toEqual({ inserted: 90 });
    // A non-string value is not a tag the filter can match.
    await db.query(
      `INSERT INTO usage_events (time, event_id, account_id, key_id, provider, model, status, price_version,
        usage_source, latency_ms, stream, tags) VALUES (now() - interval '2 days', gen_random_uuid(), $1, 'k', 'openai',
        'gpt-4o', 200, 'v', 'none', 1, false, '{"job": 7}')`,
      [acct],
    );
    await runRetention(db, { now });
    const compressed = await db.query<{ n: string }>(
      `SELECT count(*)::text AS n FROM timescaledb_information.chunks WHERE hypertable_name = 'usage_event_tags' AND is_compressed`,
    );
    expect(Number(compressed[0]!.n)).toBeGreaterThan(0);
    expect(await insertBatch(db, events)).toEqual({ inserted: 0 }); // a replay into compressed chunks
    const late = ev(acct, now - 20 * DAY + 5, '0.4', { job: 'nightly' }); // into a compressed chunk
    expect(await insertBatch(db, [late])).toEqual({ inserted: 1 });
    events.push(late);

    type Page = {
      events: { id: string; tags: Record<string, string>; provider: string }[];
      next_cursor: string | null;
    };
    const walk = async (params: Record<string, unknown>, timescale: boolean) => {
      const ids: string[] = [];
      let cursor: ReturnType<typeof decodeCursor>;
      for (;;) {
        const page = (await listEvents(db, acct, { limit: 4, ...params, ...(cursor ? { cursor } : {}) } as never, {
          retentionVisibility: true,
          timescale,
          now: new Date(now),
        })) as Page;
        ids.push(...page.events.map((e) => e.id));
        if (!page.next_cursor) return ids;
        cursor = decodeCursor(page.next_cursor);
      }
    };
    const expected = (pred: (e: UsageEvent) => boolean) =>
      events
        .filter((e) => e.accountId === acct && pred(e))
        .sort((x, y) => y.time.localeCompare(x.time) || y.id.localeCompare(x.id))
        .map((e) => e.id);
    const nightly = expected((e) => e.tags.job === 'nightly');
    expect(nightly).toHaveLength(8);
    expect(await walk({ tag: { key: 'job', value: 'nightly' } }, true)).toEqual(nightly);
    expect(await walk({ tag: { key: 'job', value: 'nightly' } }, false)).toEqual(nightly);
    const teamA = expected((e) => e.tags.team === 'a');
    expect(await walk({ tag: { key: 'team', value: 'a' } }, true)).toEqual(teamA);
    const anthropicB = expected((e) => e.tags.team === 'b' && e.provider === 'anthropic');
    expect(await walk({ tag: { key: 'team', value: 'b' }, provider: 'anthropic' }, true)).toEqual(anthropicB);
    const window = { from: new Date(now - 10 * DAY - 1).toISOString(), to: new Date(now - 3 * DAY).toISOString() };
    expect(await walk({ tag: { key: 'job', value: 'nightly' }, ...window }, true)).toEqual(
      expected((e) => e.tags.job === 'nightly' && e.time >= window.from && e.time < window.to),
    );
    // The other listings read usage_events in time windows (1, 7, 30 days, the rest): the same
    // pages as one query over every chunk, across the windows' edges and within from/to.
    const allOfAcct = await walk({}, false);
    expect(allOfAcct).toHaveLength(62); // 60, the late one, the numeric tag's
    expect(await walk({}, true)).toEqual(allOfAcct);
    const anthropic = expected((e) => e.provider === 'anthropic');
    expect(anthropic).toHaveLength(30);
    expect(await walk({ provider: 'anthropic' }, true)).toEqual(anthropic);
    expect(await walk({ ...window }, true)).toEqual(await walk({ ...window }, false));
    expect(await walk({ from: window.from }, true)).toEqual(await walk({ from: window.from }, false));
    // Past the longest plan retention nothing is listed, even for an account whose plan changed
    // since (no visibility limit yet) and before retention dropped the raw chunk.
    const fresh = await account(db, 'pro');
    await db.query(`UPDATE accounts SET plan_changed_at = now() WHERE id = $1`, [fresh]);
    await insertBatch(db, [
      ev(fresh, now - 95 * DAY, '1', { job: 'old' }),
      ev(fresh, now - 80 * DAY, '1', { job: 'old' }),
    ]);
    const old = (await listEvents(db, fresh, { limit: 10, tag: { key: 'job', value: 'old' } } as never, {
      retentionVisibility: true,
      timescale: true,
      now: new Date(now),
    })) as { events: unknown[] };
    expect(old.events).toHaveLength(1);
    // An update (as `meter pricing reprice` makes) reaches the copies, compressed ones too.
    await db.query(`UPDATE usage_events SET cost = 9, price_version = 'p2' WHERE event_id = $1`, [late.id]);
    const repriced = (await listEvents(db, acct, { limit: 50, tag: { key: 'job', value: 'nightly' } } as never, {
      retentionVisibility: true,
      timescale: true,
      now: new Date(now),
    })) as { events: { id: string; cost: unknown; price_version: string }[] };
    expect(repriced.events.find((e) => e.id === late.id)).toMatchObject({ cost: { text: '9' }, price_version: 'p2' });
    expect(repriced.events).toHaveLength(8);
    const [copies] = await db.query<{ n: string }>(
      `SELECT count(*)::text AS n FROM usage_event_tags WHERE account_id = $1`,
      [acct],
    );
    expect(copies!.n).toBe(String(60 + 8)); // one per string tag; the numeric job is not one
  }, 60_000);
});
