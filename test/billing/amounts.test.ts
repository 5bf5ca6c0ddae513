import { describe, expect, it } from 'vitest';
import { formatBilled, markedUp, nextMicros, parseMarkupPct, toMicrosHalfUp } from '../../src/billing/amounts.js';

describe('billing amounts', () => {
  it('marks up exactly and rounds micro-dollars half up', () => {
    expect(formatBilled(markedUp('0.00000123', '20'))).toBe('0.000001476');
    expect(formatBilled(markedUp('12.34567891', '12.3456'))).toBe('13.86982704551296');
    expect(toMicrosHalfUp(markedUp('0.0000005', '0'))).toBe(1n); // exactly half: up
    expect(toMicrosHalfUp(markedUp('0.00000049', '0'))).toBe(0n);
  });

  it('carries the rounding remainder: the worked example of docs/billing.md', () => {
    let carry = { billed: 0n, micros: 0n };
    const values = ['0.0020676', '0.0004', '0.000001'].map((cost) => {
      const next = nextMicros(carry, markedUp(cost, '20'));
      carry = next.carry;
      return next.micros;
    });
    expect(values).toEqual([2481n, 480n, 1n]);
    expect(formatBilled(carry.billed)).toBe('0.00296232');
    expect(carry.micros).toBe(2962n);
  });

  it('sums to the month rounded once, whatever the split', () => {
    let carry = { billed: 0n, micros: 0n };
    let sent = 0n;
    for (let i = 0; i < 1000; i++) {
      const next = nextMicros(carry, markedUp('0.00000037', '7.5'));
      carry = next.carry;
      sent += next.micros;
    }
    // 1000 × 0.00000037 × 1.075 = 0.00039775 $ = 397.75 µ$ → 398
    expect(sent).toBe(398n);
  });

  it('accepts markups from 0 to 10000 with up to 4 decimals', () => {
    expect(parseMarkupPct('20')).toBe('20');
    expect(parseMarkupPct('12.5000')).toBe('12.5');
    expect(parseMarkupPct('0')).toBe('0');
    expect(parseMarkupPct('10000')).toBe('10000');
    for (const bad of ['-1', '10000.0001', '1.23456', 'abc', '', '1e3']) expect(parseMarkupPct(bad)).toBeUndefined();
  });
});
