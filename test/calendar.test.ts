import { describe, expect, it } from 'vitest';
import { windowBounds, windowDays } from '../src/calendar.js';

const at = (iso: string) => Date.parse(iso);
const days = (b: { start: number; end: number }) => [new Date(b.start).toISOString(), new Date(b.end).toISOString()];

describe('calendar windows (UTC)', () => {
  it('day, week (from Monday), month and quarter that contain an instant', () => {
    const t = at('2026-02-01T23:59:59.999Z'); // a Sunday
    expect(days(windowBounds('day', t))).toEqual(['2026-02-01T00:00:00.000Z', '2026-02-02T00:00:00.000Z']);
    expect(days(windowBounds('week', t))).toEqual(['2026-01-26T00:00:00.000Z', '2026-02-02T00:00:00.000Z']);
    expect(days(windowBounds('month', t))).toEqual(['2026-02-01T00:00:00.000Z', '2026-03-01T00:00:00.000Z']);
    expect(days(windowBounds('quarter', t))).toEqual(['2026-01-01T00:00:00.000Z', '2026-04-01T00:00:00.000Z']);
  });

  it('offsets move whole windows, across year ends and month lengths', () => {
    const t = at('2026-03-31T12:00:00Z');
    expect(windowDays('month', t, -1)).toEqual({ from: '2026-02-01', to: '2026-03-01' });
    expect(windowDays('month', t, -13)).toEqual({ from: '2025-02-01', to: '2025-03-01' });
    expect(windowDays('quarter', t, 3)).toEqual({ from: '2026-10-01', to: '2027-01-01' });
    expect(windowDays('week', at('2027-01-01T00:00:00Z'), 1)).toEqual({ from: '2027-01-04', to: '2027-01-11' });
    expect(windowDays('day', at('2028-02-28T05:00:00Z'), 1)).toEqual({ from: '2028-02-29', to: '2028-03-01' });
  });

  it('an instant at a window start belongs to that window, the instant before to the previous one', () => {
    const start = at('2026-07-01T00:00:00Z');
    expect(windowBounds('quarter', start).start).toBe(start);
    expect(windowBounds('quarter', start - 1).end).toBe(start);
  });
});
