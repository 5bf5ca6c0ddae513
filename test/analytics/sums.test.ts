/**
 * daily, summary and by-tag read only the rollups; over randomised events (many accounts, tags,
 * models and days, day-boundary times, money up to 8 decimals) their answers must equal what
 * the raw events sum to, digit for digit. Expected values are computed here with BigInt.
 */
import { beforeAll, expect, it } from 'vitest';
import { addDays, currentMonth, currentPeriod, dailyWindow, type Period } from '../../src/calendar.js';
import type { UsageEvent } from '../../src/metering/event.js';
import type { ProviderSlug } from '../../src/providers/types.js';
import { refreshAggregates } from '../../src/store/timescale/maintenance.js';
import { describeEachBackend } from '../helpers/stores.js';
import { createAccount, FixedKeys, startApi, type TestAccount, type TestApi } from './helpers/api.js';
import { fromUnits, toUnits } from './helpers/decimal.js';
import { makeEvent, seedEvents } from './helpers/seed.js';

const NOW = new Date('2026-05-14T15:30:00.000Z');
const SEED = Number(process.env.ANALYTICS_TEST_SEED ?? 20260514);
const ACCOUNTS = 6;
const EVENTS = 3000;
const MODELS: [ProviderSlug, string][] = [
  ['openai', 'gpt-4o'],
  ['openai', 'gpt-4o-mini'],
  ['anthropic', 'claude-sonnet-4'],
  ['groq', 'llama-3.3-70b'],
  ['gemini', 'gemini-2.5-flash'],
  ['mistral', 'mistral-large'],
];

function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function randomEvents(accounts: string[]): UsageEvent[] {
  const rnd = mulberry32(SEED);
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(rnd() * xs.length)]!;
  const events: UsageEvent[] = [];
  for (let i = 0; i < EVENTS; i++) {
    const day = addDays('2026-05-14', -Math.floor(rnd() * 130));
    // A fifth of the calls sit on the first or last millisecond of a UTC day.
    const edge = rnd();
    const ms = edge < 0.1 ? 0 : edge < 0.2 ? 86_399_999 : Math.floor(rnd() * 86_400_000);
    let time = new Date(Date.parse(`${day}T00:00:00Z`) + ms);
    if (time > NOW) time = NOW;
    const costKind = rnd();
    const units =
      costKind < 0.1
        ? 0n
        : costKind < 0.15
          ? BigInt(Math.floor(rnd() * 1e9)) * 100_000_000n + 12_345_678n
          : BigInt(Math.floor(rnd() * 1e10));
    const tags: Record<string, string> = {};
    if (rnd() < 0.7) tags.team = pick(['search', 'ads', 'infra', 'ml', 'growth']);
    if (rnd() < 0.5) tags.env = pick(['prod', 'staging']);
    if (rnd() < 0.3) tags.feature = `f${Math.floor(rnd() * 30)}`;
    const [provider, model] = pick(MODELS);
    events.push(
      makeEvent({
        accountId: pick(accounts),
        time: time.toISOString(),
        provider,
        model,
        cost: fromUnits(units),
        inputTokens: Math.floor(rnd() * 200_000),
        outputTokens: Math.floor(rnd() * 8_000),
        tags,
      }),
    );
  }
  return events;
}

const dayOf = (e: UsageEvent) => e.time.slice(0, 10);
const sum = (es: UsageEvent[]) => ({
  spend: fromUnits(es.reduce((s, e) => s + toUnits(e.cost), 0n)),
  requests: String(es.length),
});
const bySpendDesc = (a: { spend: string; requests: string }, b: { spend: string; requests: string }) => {
  const d = toUnits(b.spend) - toUnits(a.spend);
  return d !== 0n ? (d > 0n ? 1 : -1) : Number(b.requests) - Number(a.requests);
};

// In every mode, TimescaleDB's included: equal to the raw sums, hence to each other.
describeEachBackend(
  'analytics sums equal raw-event sums',
  (backend) => {
    let api: TestApi;
    let accounts: TestAccount[];
    let events: UsageEvent[];

    beforeAll(async () => {
      const db = await backend.open();
      const auth = new FixedKeys();
      accounts = [];
      for (let i = 0; i < ACCOUNTS; i++) accounts.push(await createAccount(db, auth, 'pro'));
      events = randomEvents(accounts.map((a) => a.principal.accountId));
      if (backend.name === 'timescale') {
        // Dates must not depend on the session's TimeZone (the engine has one session: this is it).
        await db.exec(`SET TimeZone = 'Pacific/Kiritimati'`); // UTC+14
        // Half the events materialized by a refresh, the other half written late, behind the
        // watermark, and counted after the next refresh: both parts of the aggregates are summed.
        const half = EVENTS / 2;
        expect(await seedEvents(db, events.slice(0, half))).toBe(half);
        await refreshAggregates(db, { from: new Date('2026-01-01T00:00:00Z') });
        expect(await seedEvents(db, events.slice(half))).toBe(EVENTS - half);
        await refreshAggregates(db, { from: new Date('2026-01-01T00:00:00Z') });
      } else {
        expect(await seedEvents(db, events)).toBe(EVENTS);
      }
      // Replaying a batch must change nothing (the writer retries with the same event ids).
      expect(await seedEvents(db, events.slice(0, 500))).toBe(0);
      api = await startApi(db, auth, NOW);
    }, 120_000);

    const mine = (a: TestAccount) => events.filter((e) => e.accountId === a.principal.accountId);
    const within = (es: UsageEvent[], from: string, to: string) => es.filter((e) => dayOf(e) >= from && dayOf(e) < to);

    it(`daily (seed ${SEED}): every day of 90 equals the raw sum`, async () => {
      for (const a of accounts) {
        const { from } = dailyWindow(NOW, 90);
        const expected = Array.from({ length: 90 }, (_, i) => addDays(from, i)).map((date) => ({
          date,
          ...sum(mine(a).filter((e) => dayOf(e) === date)),
        }));
        const r = await api.get('/analytics/daily?days=90', a.key);
        expect(r.body.days).toEqual(expected);
      }
    });

    it('summary: month totals and by_model equal the raw sums', async () => {
      const { from, to } = currentMonth(NOW);
      for (const a of accounts) {
        const month = within(mine(a), from, to);
        const models = MODELS.map(([provider, model]) => {
          const es = month.filter((e) => e.provider === provider && e.model === model);
          return {
            provider,
            model,
            ...sum(es),
            input_tokens: String(es.reduce((s, e) => s + e.inputTokens, 0)),
            output_tokens: String(es.reduce((s, e) => s + e.outputTokens, 0)),
          };
        })
          .filter((m) => m.requests !== '0')
          .sort(bySpendDesc);
        const r = await api.get('/analytics/summary', a.key);
        expect(r.body).toEqual({
          month: '2026-05',
          ...sum(month),
          unpriced_requests: '0',
          budget: null,
          budget_utilization_pct: null,
          hard_cap: false,
          by_model: models,
        });
      }
    });

    it('by-tag: every key and period equals the raw sums, untagged calls under null', async () => {
      for (const a of accounts) {
        for (const period of ['week', 'month', 'quarter'] as Period[]) {
          const { from, to } = currentPeriod(NOW, period);
          const es = within(mine(a), from, to);
          for (const key of ['team', 'env', 'feature', 'absent']) {
            const values = [...new Set(es.map((e) => e.tags[key]))];
            const groups = values
              .map((value) => ({ value: value ?? null, ...sum(es.filter((e) => e.tags[key] === value)) }))
              .sort(
                (x, y) =>
                  bySpendDesc(x, y) || (x.value === null ? 1 : y.value === null ? -1 : x.value < y.value ? -1 : 1),
              );
            const r = await api.get(`/analytics/by-tag?key=${key}&period=${period}`, a.key);
            expect(r.body, `${key} ${period}`).toEqual({ key, period, from, to, groups });
          }
        }
      }
    });
  },
  { timescale: true },
);
