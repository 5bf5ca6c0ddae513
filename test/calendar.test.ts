import { describe, expect, it } from 'vitest';
import { validTimeZone, windowBounds, windowDays } from '../src/calendar.js';

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

describe('calendar windows in an IANA zone', () => {
  const iso = (t: number) => new Date(t).toISOString();
  const win = (kind: 'day' | 'week' | 'month' | 'quarter', instant: string, zone: string) => {
    const b = windowBounds(kind, at(instant), 0, zone);
    return [iso(b.start), iso(b.end)];
  };

  it('half- and quarter-hour offsets: Asia/Kolkata (+5:30) and Asia/Kathmandu (+5:45)', () => {
    // 2026-03-31T18:29:59Z is 23:59:59 on 31 March in Kolkata; a second later it is April.
    expect(win('month', '2026-03-31T18:29:59Z', 'Asia/Kolkata')).toEqual([
      '2026-02-28T18:30:00.000Z',
      '2026-03-31T18:30:00.000Z',
    ]);
    expect(win('quarter', '2026-03-31T18:30:00Z', 'Asia/Kolkata')).toEqual([
      '2026-03-31T18:30:00.000Z',
      '2026-06-30T18:30:00.000Z',
    ]);
    expect(win('day', '2026-01-01T18:14:59Z', 'Asia/Kathmandu')).toEqual([
      '2025-12-31T18:15:00.000Z',
      '2026-01-01T18:15:00.000Z',
    ]);
    // 2026-11-26 is a Thursday; the ISO week starts on Monday the 23rd, Kathmandu time.
    expect(win('week', '2026-11-26T10:00:00Z', 'Asia/Kathmandu')).toEqual([
      '2026-11-22T18:15:00.000Z',
      '2026-11-29T18:15:00.000Z',
    ]);
  });

  it('America/New_York across DST: a 23-hour and a 25-hour day, a month with both offsets', () => {
    expect(win('day', '2026-03-08T12:00:00Z', 'America/New_York')).toEqual([
      '2026-03-08T05:00:00.000Z',
      '2026-03-09T04:00:00.000Z',
    ]);
    expect(win('day', '2026-11-01T12:00:00Z', 'America/New_York')).toEqual([
      '2026-11-01T04:00:00.000Z',
      '2026-11-02T05:00:00.000Z',
    ]);
    expect(win('month', '2026-03-15T00:00:00Z', 'America/New_York')).toEqual([
      '2026-03-01T05:00:00.000Z',
      '2026-04-01T04:00:00.000Z',
    ]);
  });

  it('Australia/Lord_Howe: its 30-minute DST change makes 23.5- and 24.5-hour days', () => {
    expect(win('day', '2026-10-04T12:00:00Z', 'Australia/Lord_Howe')).toEqual([
      '2026-10-03T13:30:00.000Z',
      '2026-10-04T13:00:00.000Z',
    ]);
    expect(win('day', '2026-04-05T12:00:00Z', 'Australia/Lord_Howe')).toEqual([
      '2026-04-04T13:00:00.000Z',
      '2026-04-05T13:30:00.000Z',
    ]);
  });

  it('a day whose midnight a DST change skips starts when the gap ends (America/Santiago)', () => {
    expect(win('day', '2026-09-06T12:00:00Z', 'America/Santiago')).toEqual([
      '2026-09-06T04:00:00.000Z',
      '2026-09-07T03:00:00.000Z',
    ]);
  });

  it('consecutive windows tile time: each end is the next start', () => {
    for (const zone of ['Asia/Kathmandu', 'America/New_York', 'Australia/Lord_Howe'])
      for (const kind of ['day', 'week', 'month', 'quarter'] as const) {
        let t = at('2026-01-01T00:00:00Z');
        for (let i = 0; i < 30; i++) {
          const b = windowBounds(kind, t, 0, zone);
          expect(b.start).toBeLessThanOrEqual(t);
          expect(b.end).toBeGreaterThan(t);
          expect(windowBounds(kind, b.end, 0, zone).start).toBe(b.end);
          expect(windowBounds(kind, b.end - 1, 0, zone).end).toBe(b.end);
          t = b.end + 3_600_000 * 7;
        }
      }
  });

  it('zone names: canonical spelling, unknown ones refused', () => {
    expect(validTimeZone('utc')).toBe('UTC');
    expect(validTimeZone('Asia/Kolkata')).toBe('Asia/Kolkata');
    expect(validTimeZone('america/new_york')).toBe('America/New_York');
    expect(validTimeZone('Mars/Olympus')).toBeUndefined();
    expect(validTimeZone('')).toBeUndefined();
  });
});
