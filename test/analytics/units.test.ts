import { describe, expect, it } from 'vitest';
import { currentMonth, currentPeriod, dailyWindow } from '../../src/calendar.js';
import { decodeCursor, encodeCursor } from '../../src/analytics/cursor.js';
import { integer, money, stringifyJson } from '../../src/money.js';

describe('exact JSON numbers', () => {
  it('writes decimals verbatim, trimming trailing zeros', () => {
    expect(
      stringifyJson({ a: money('0.10000000'), b: money('12.00000000'), c: money('0'), d: money('-0.00000000') }),
    ).toBe('{"a":0.1,"b":12,"c":0,"d":0}');
    expect(stringifyJson([money('123456789012.30000001'), integer('9007199254740993'), integer('42.0')])).toBe(
      '[123456789012.30000001,9007199254740993,42]',
    );
    expect(stringifyJson({ s: 'x"y', n: null, t: true, f: 1.5, nested: { arr: [] } })).toBe(
      '{"s":"x\\"y","n":null,"t":true,"f":1.5,"nested":{"arr":[]}}',
    );
  });

  it('refuses anything that is not a decimal', () => {
    expect(() => money('1e5')).toThrow();
    expect(() => money('NaN')).toThrow();
    expect(() => integer('1.5')).toThrow();
  });
});

describe('UTC calendar windows', () => {
  it('daily ends today and includes it', () => {
    expect(dailyWindow(new Date('2026-03-01T00:00:00Z'), 3)).toEqual({ from: '2026-02-27', to: '2026-03-01' });
    expect(dailyWindow(new Date('2026-03-01T23:59:59.999Z'), 1)).toEqual({ from: '2026-03-01', to: '2026-03-01' });
  });

  it('ISO weeks start on Monday, also from a Sunday and across a year end', () => {
    expect(currentPeriod(new Date('2026-05-17T23:00:00Z'), 'week')).toEqual({ from: '2026-05-11', to: '2026-05-18' });
    expect(currentPeriod(new Date('2026-05-18T00:00:00Z'), 'week')).toEqual({ from: '2026-05-18', to: '2026-05-25' });
    expect(currentPeriod(new Date('2027-01-01T12:00:00Z'), 'week')).toEqual({ from: '2026-12-28', to: '2027-01-04' });
  });

  it('months and quarters end at the next first day', () => {
    expect(currentMonth(new Date('2026-12-31T23:59:59Z'))).toEqual({
      month: '2026-12',
      from: '2026-12-01',
      to: '2027-01-01',
    });
    expect(currentPeriod(new Date('2026-02-10T00:00:00Z'), 'month')).toEqual({ from: '2026-02-01', to: '2026-03-01' });
    expect(currentPeriod(new Date('2026-11-30T00:00:00Z'), 'quarter')).toEqual({
      from: '2026-10-01',
      to: '2027-01-01',
    });
    expect(currentPeriod(new Date('2026-04-01T00:00:00Z'), 'quarter')).toEqual({
      from: '2026-04-01',
      to: '2026-07-01',
    });
  });
});

describe('events cursor', () => {
  it('round-trips and refuses anything else', () => {
    const c = { time: '2026-05-14T09:00:00.123456Z', eventId: '0196c1a2-0000-7000-8000-000000000001' };
    expect(decodeCursor(encodeCursor(c))).toEqual(c);
    for (const bad of [
      '',
      'abc',
      encodeCursor(c) + '$',
      Buffer.from(`${c.time}|${c.eventId}|x`).toString('base64url'),
      Buffer.from(`2026-05-14T09:00:00Z|${c.eventId}`).toString('base64url'),
    ]) {
      expect(decodeCursor(bad)).toBeUndefined();
    }
  });
});
