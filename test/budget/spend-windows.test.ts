/**
 * A budget's window spend is exact to the 8th decimal in any zone and scope, on every store:
 * events on both sides of each window edge (a second before, at, a second after) of day, week,
 * month and quarter windows in Asia/Kolkata (+5:30), Asia/Kathmandu (+5:45), America/New_York
 * and Australia/Lord_Howe across their DST changes, compared with the sum over the raw events.
 */
import { randomUUID } from 'node:crypto';
import { beforeAll, expect, it } from 'vitest';
import { windowBounds, type WindowKind } from '../../src/calendar.js';
import { spendQuery, topQueries } from '../../src/budget/spend.js';
import { listEvents } from '../../src/analytics/events-query.js';
import { eventsParams, parseParams } from '../../src/analytics/params.js';
import { modelMatches, parseScope, type Scope } from '../../src/budget/scope.js';
import type { UsageEvent } from '../../src/metering/event.js';
import type { ProviderSlug } from '../../src/providers/types.js';
import { formatUnits, toUnits } from '../../src/money.js';
import { refreshAggregates } from '../../src/store/timescale/maintenance.js';
import type { Db } from '../../src/store/types.js';
import { makeEvent, seedEvents } from '../analytics/helpers/seed.js';
import { describeEachBackend } from '../helpers/stores.js';

const ZONES = ['UTC', 'Asia/Kolkata', 'Asia/Kathmandu', 'America/New_York', 'Australia/Lord_Howe'];
const KINDS: WindowKind[] = ['day', 'week', 'month', 'quarter'];
// Instants around DST changes: New York 2026-03-08 and 2026-11-01, Lord Howe 2026-04-05 and 2026-10-04.
const INSTANTS = ['2026-03-08T12:00:00Z', '2026-11-01T12:00:00Z', '2026-04-05T12:00:00Z', '2026-10-04T12:00:00Z'];
const SCOPES = ['account', 'key:aaaaaaaaaaaa', 'tag:tenant=globex', 'model:gpt-4o-mini', 'provider:anthropic'].map(
  parseScope,
);

function covers(s: Scope, e: UsageEvent): boolean {
  if (s.kind === 'account') return true;
  if (s.kind === 'key') return e.keyId === s.value;
  if (s.kind === 'tag') return e.tags[s.key!] === s.value;
  if (s.kind === 'provider') return e.provider === s.value;
  return modelMatches(s.value!, e.model) || modelMatches(s.value!, e.requestedModel);
}

const variants: Partial<UsageEvent>[] = [
  { keyId: 'aaaaaaaaaaaa', tags: { tenant: 'globex' }, model: 'gpt-4o-mini-2024-07-18', requestedModel: 'gpt-4o-mini' },
  { keyId: 'bbbbbbbbbbbb', tags: { tenant: 'initech' }, model: 'gpt-4o', requestedModel: 'gpt-4o' },
  {
    keyId: 'aaaaaaaaaaaa',
    provider: 'anthropic' as ProviderSlug,
    model: 'claude-sonnet-4-5-20250929',
    requestedModel: 'claude-sonnet-4-5',
  },
  {
    keyId: 'bbbbbbbbbbbb',
    tags: { tenant: 'globex', team: 'search' },
    model: 'gpt-4o-mini-high',
    requestedModel: null,
  },
];

describeEachBackend(
  'budget window spend',
  (backend) => {
    let db: Db;
    let accountId: string;
    const events: UsageEvent[] = [];

    beforeAll(async () => {
      db = await backend.open();
      [{ id: accountId }] = (await db.query<{ id: string }>(`INSERT INTO accounts (name) VALUES ($1) RETURNING id`, [
        `a${randomUUID().slice(0, 8)}`,
      ])) as [{ id: string }];
      const edges = new Set<number>();
      for (const zone of ZONES)
        for (const kind of KINDS)
          for (const at of INSTANTS) {
            const b = windowBounds(kind, Date.parse(at), 0, zone);
            edges.add(b.start).add(b.end);
          }
      let i = 0;
      for (const edge of edges)
        for (const delta of [-1000, 0, 1000, 7 * 60_000]) {
          const v = variants[i % variants.length]!;
          // Costs with all 8 decimals in use, different per event.
          const cost = formatUnits(100_000_001n + BigInt(i) * 7_777_777n);
          events.push(makeEvent({ accountId, time: new Date(edge + delta).toISOString(), cost, ...v }));
          i++;
        }
      await seedEvents(db, events);
      if (db.kind === 'timescale')
        await refreshAggregates(db, {
          from: new Date('2025-12-01T00:00:00Z'),
          now: Date.parse('2027-03-01T00:00:00Z'),
        });
    }, 120_000);

    it('equals the sum of the raw events in every zone, window and scope', async () => {
      let checked = 0;
      for (const zone of ZONES)
        for (const kind of KINDS)
          for (const at of INSTANTS.slice(0, db.kind === 'timescale' ? 2 : 4))
            for (const scope of SCOPES) {
              const w = windowBounds(kind, Date.parse(at), 0, zone);
              const expected = events
                .filter((e) => Date.parse(e.time) >= w.start && Date.parse(e.time) < w.end && covers(scope, e))
                .reduce((sum, e) => sum + toUnits(e.cost), 0n);
              const { sql, params } = spendQuery(accountId, scope, w);
              const [row] = await db.query<{ spend: string }>(sql, params);
              expect({ zone, kind, at, scope, spend: formatUnits(toUnits(row!.spend)) }).toEqual({
                zone,
                kind,
                at,
                scope,
                spend: formatUnits(expected),
              });
              checked++;
            }
      expect(checked).toBeGreaterThan(100);
    }, 120_000);

    it('the top models and tags of an alert are those of the scope and window, as the raw events say', async () => {
      const top = (rows: Map<string, { spend: bigint; requests: number }>) =>
        [...rows]
          .sort((a, b) => (a[1].spend === b[1].spend ? (a[0] < b[0] ? -1 : 1) : a[1].spend > b[1].spend ? -1 : 1))
          .slice(0, 5)
          .map(([k, v]) => [k, formatUnits(v.spend), v.requests]);
      const add = (m: Map<string, { spend: bigint; requests: number }>, k: string, e: UsageEvent) => {
        const r = m.get(k) ?? { spend: 0n, requests: 0 };
        m.set(k, { spend: r.spend + toUnits(e.cost), requests: r.requests + 1 });
      };
      let checked = 0;
      for (const zone of ZONES)
        for (const kind of KINDS)
          for (const scope of SCOPES) {
            const w = windowBounds(kind, Date.parse(INSTANTS[1]!), 0, zone);
            const models = new Map<string, { spend: bigint; requests: number }>();
            const tags = new Map<string, { spend: bigint; requests: number }>();
            for (const e of events) {
              if (Date.parse(e.time) < w.start || Date.parse(e.time) >= w.end || !covers(scope, e)) continue;
              add(models, `${e.provider}/${e.model}`, e);
              for (const [k, v] of Object.entries(e.tags)) add(tags, `${k}=${v}`, e);
            }
            const q = topQueries(accountId, scope, w);
            const gotModels = await db.query<{ provider: string; model: string; spend: string; requests: string }>(
              q.models.sql,
              q.models.params,
            );
            const gotTags = await db.query<{ key: string; value: string; spend: string; requests: string }>(
              q.tags.sql,
              q.tags.params,
            );
            const where = { zone, kind, scope: `${scope.kind}:${scope.value}` };
            expect({
              ...where,
              models: gotModels.map((r) => [
                `${r.provider}/${r.model}`,
                formatUnits(toUnits(r.spend)),
                Number(r.requests),
              ]),
              tags: gotTags.map((r) => [`${r.key}=${r.value}`, formatUnits(toUnits(r.spend)), Number(r.requests)]),
            }).toEqual({ ...where, models: top(models), tags: top(tags) });
            checked++;
          }
      expect(checked).toBe(ZONES.length * KINDS.length * SCOPES.length);
    }, 120_000);

    it('a shadow refusal is flagged on its event, through the tag table too (TimescaleDB)', async () => {
      const flagged = makeEvent({
        accountId,
        time: new Date().toISOString(),
        tags: { tenant: 'flagged' },
        wouldBlock: ['abcdefabcdef'],
      });
      await seedEvents(db, [flagged]);
      const q = parseParams(eventsParams, new URLSearchParams({ tag: 'tenant:flagged' }));
      if (!q.ok) throw new Error(q.message);
      const page = (await listEvents(db, accountId, q.value, { timescale: db.kind === 'timescale' })) as {
        events: { id: string; would_block?: string[] }[];
      };
      expect(page.events).toMatchObject([{ id: flagged.id, would_block: ['abcdefabcdef'] }]);
    });

    it('follows a change of cost (meter pricing reprice updates events in place)', async () => {
      const e = events[5]!;
      const w = windowBounds('day', Date.parse(e.time), 0, 'Asia/Kathmandu');
      const { sql, params } = spendQuery(accountId, parseScope('account'), w);
      const before = toUnits((await db.query<{ spend: string }>(sql, params))[0]!.spend);
      await db.query(`UPDATE usage_events SET cost = cost + 1.00000001 WHERE event_id = $1`, [e.id]);
      if (db.kind === 'timescale')
        await refreshAggregates(db, { from: new Date(w.start - 86_400_000), now: w.end + 86_400_000 });
      const after = toUnits((await db.query<{ spend: string }>(sql, params))[0]!.spend);
      expect(after - before).toBe(100_000_001n);
    });
  },
  { timescale: true },
);
