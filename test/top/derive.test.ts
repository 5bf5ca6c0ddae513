import { describe, expect, it } from 'vitest';
import { windowBounds } from '../../src/calendar.js';
import { toUnits } from '../../src/money.js';
import {
  bucketsFrom,
  burnPerHour,
  deriveFigures,
  hardCapState,
  percentile,
  projectMonthEnd,
  spendPerMinute,
  windowStats,
  type Snapshot,
  type TopEvent,
} from '../../cli/top/derive.js';
import { figuresJson } from '../../cli/top/json.js';

const NOW = Date.parse('2026-11-24T12:30:30Z'); // 30 s into minute 12:30
const ev = (secondsAgo: number, cost: string, over: Partial<TopEvent> = {}): TopEvent => ({
  id: `e${secondsAgo}-${cost}`,
  recordedUs: (NOW - secondsAgo * 1000) * 1000,
  timeMs: NOW - secondsAgo * 1000 - 500,
  provider: 'openai',
  model: 'gpt-4o-mini',
  status: 200,
  inputTokens: '100',
  outputTokens: '20',
  cost: toUnits(cost),
  usageSource: 'provider',
  unpriced: false,
  latencyMs: 100,
  tags: {},
  ...over,
});

describe('burn rate', () => {
  it('divides the spend since the start of the window by its exact length, per hour', () => {
    // 5-minute window: minutes 12:26..12:30, i.e. 4 min 30 s = 270 s.
    const events = [ev(10, '0.27'), ev(200, '0.27'), ev(400, '5')]; // 400 s ago is 12:23:50: outside
    const b = bucketsFrom(events);
    expect(burnPerHour(b, NOW, 5)).toBe(toUnits('7.2')); // 0.54 $ in 270 s = 7.2 $/h
    // 60-minute window starts 11:31:00: 59.5 min; 5.54 $ → 5.54 × 60 / 59.5
    expect(burnPerHour(b, NOW, 60)).toBe(toUnits('5.58655462')); // 5.586554621… rounded half-even
  });

  it('is exact on amounts a float sum gets wrong', () => {
    const events = Array.from({ length: 10 }, (_, i) => ev(i, '0.1'));
    // 0.1 × 10 = 1 $ exactly (a float sum gives 0.9999999999999999) over 30 s → 120 $/h.
    expect(burnPerHour(bucketsFrom(events), NOW, 1)).toBe(toUnits('120'));
  });

  it('is zero without spend', () => {
    expect(burnPerHour(new Map(), NOW, 5)).toBe(0n);
  });
});

describe('month-end projection', () => {
  it('adds the hourly rate for every hour left in the UTC month', () => {
    expect(windowBounds('month', NOW).end).toBe(Date.parse('2026-12-01T00:00:00Z'));
    // 155.5 hours minus 30 s left: 6 days 11 h 29 min 30 s = 155.491666… h
    const projected = projectMonthEnd(toUnits('100'), toUnits('2'), NOW);
    expect(projected).toBe(toUnits('410.98333333'));
  });

  it('is the spend so far when nothing burns', () => {
    expect(projectMonthEnd(toUnits('12.34'), 0n, NOW)).toBe(toUnits('12.34'));
  });
});

describe('window', () => {
  it('counts calls recorded in the last seconds: rate, errors, latency, estimated, unpriced', () => {
    const events = [
      ...Array.from({ length: 18 }, (_, i) => ev(i + 1, '0.001', { latencyMs: 100 + i * 10 })),
      ev(30, '0', { status: 429, latencyMs: 5 }),
      ev(40, '0.002', { usageSource: 'estimated', latencyMs: 2000 }),
      ev(50, '0', { unpriced: true, latencyMs: 3000 }),
      ev(61, '0.5', { status: 500 }), // outside the 60 s window
    ];
    const w = windowStats(events, NOW, 60);
    expect(w.calls).toBe(21);
    expect(w.calls_per_s).toBe(0.35);
    expect(w.error_rate_pct).toBe(4.8); // 1 / 21
    expect(w.estimated_pct).toBe(4.8);
    expect(w.unpriced_pct).toBe(4.8);
    // sorted: 5, 100..270, 2000, 3000 → rank ceil(.5×21)=11 → 190; rank ceil(.95×21)=20 → 2000
    expect(w.p50_ms).toBe(190);
    expect(w.p95_ms).toBe(2000);
  });

  it('has no rates without calls', () => {
    expect(windowStats([], NOW, 60)).toMatchObject({ calls: 0, calls_per_s: 0, error_rate_pct: null, p50_ms: null });
  });

  it('percentile is nearest-rank', () => {
    expect(percentile([1, 2, 3, 4], 50)).toBe(2);
    expect(percentile([1, 2, 3, 4], 95)).toBe(4);
    expect(percentile([7], 95)).toBe(7);
  });
});

describe('sparkline data and hard cap', () => {
  it('gives the spend of each of the last 60 minutes, current last', () => {
    const s = spendPerMinute(bucketsFrom([ev(0, '1'), ev(40, '2'), ev(3570, '3'), ev(3600, '4')]), NOW);
    expect(s).toHaveLength(60);
    expect(s[59]).toBe(toUnits('1'));
    expect(s[58]).toBe(toUnits('2')); // 40 s ago is 12:29:50
    expect(s[0]).toBe(toUnits('3')); // 3570 s ago is 11:31:00, the oldest minute shown
    expect(s.reduce((a, b) => a + b, 0n)).toBe(toUnits('6')); // 3600 s ago (11:30:30) is out
  });

  it('says whether the hard cap refuses calls', () => {
    expect(hardCapState(false, 10n, 5n)).toBe('off');
    expect(hardCapState(true, 10n, null)).toBe('off');
    expect(hardCapState(true, 4n, 5n)).toBe('on');
    expect(hardCapState(true, 5n, 5n)).toBe('reached');
  });
});

describe('figures', () => {
  it('derives exact money from stored decimals', () => {
    const events = [ev(2, '0.20000000'), ev(1, '0.10000000', { tags: { team: 'search' } })]; // oldest first
    const snapshot: Snapshot = {
      account: 'acme',
      plan: 'pro',
      accounts: ['acme'],
      nowMs: NOW,
      intervalS: 1,
      windowS: 60,
      month: { spend: '80.30000000', requests: '1200', budget: '100.00000000', hard_cap: true, levels_fired: [50, 80] },
      byModel: [{ provider: 'openai', model: 'gpt-4o-mini', spend: '80.30000000', requests: '1200' }],
      tagKey: 'team',
      tagKeys: ['env', 'team'],
      byTag: [
        { value: 'search', spend: '0.10000000', requests: '1' },
        { value: null, spend: '80.20000000', requests: '1199' },
      ],
      buckets: bucketsFrom(events),
      events,
      tailSize: 1,
    };
    const f = deriveFigures(snapshot);
    expect(f.month).toEqual({
      month: '2026-11',
      spend: '80.3',
      requests: '1200',
      budget: '100',
      utilization_pct: '80.3',
      hard_cap: 'on',
      levels_fired: [50, 80],
    });
    expect(f.burn.per_hour_5m).toBe('4'); // 0.3 $ in 270 s
    expect(f.by_tag.groups[1]).toEqual({ value: null, spend: '80.2', requests: '1199' });
    expect(f.tail).toHaveLength(1);
    expect(f.tail[0]).toMatchObject({ cost: '0.1', tags: { team: 'search' }, status: 200 });
    expect(f.spend_per_minute.at(-1)).toBe('0.3');
    // --json: hard_cap a boolean, as /analytics/summary has it
    const month = (JSON.parse(figuresJson(f)) as { month: Record<string, unknown> }).month;
    expect(month).toMatchObject({ hard_cap: true, hard_cap_reached: false, spend: 80.3, budget: 100 });
    const reached = JSON.parse(
      figuresJson(deriveFigures({ ...snapshot, month: { ...snapshot.month, spend: '100.00000001' } })),
    ) as { month: Record<string, unknown> };
    expect(reached.month).toMatchObject({ hard_cap: true, hard_cap_reached: true });
    const off = JSON.parse(figuresJson(deriveFigures({ ...snapshot, month: { ...snapshot.month, hard_cap: false } })));
    expect(off.month).toMatchObject({ hard_cap: false, hard_cap_reached: false });
  });
});
