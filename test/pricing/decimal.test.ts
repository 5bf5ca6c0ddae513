import { describe, it, expect } from 'vitest';
import {
  divRoundHalfEven,
  formatDec,
  formatFixed,
  parseDecimal,
  discountRatio,
  pow10,
} from '../../src/pricing/decimal.js';

describe('decimal', () => {
  it('parses decimal strings and numbers through their shortest text, never float arithmetic', () => {
    expect(parseDecimal('0.15')).toEqual({ coef: 15n, scale: 2 });
    expect(parseDecimal('3.750')).toEqual({ coef: 375n, scale: 2 });
    expect(parseDecimal(0.135)).toEqual({ coef: 135n, scale: 3 });
    // 0.1 + 0.2 is 0.30000000000000004 as a float: its shortest text is what we keep.
    expect(formatDec(parseDecimal(0.1 + 0.2)!)).toBe('0.30000000000000004');
    expect(parseDecimal(1e-7)).toEqual({ coef: 1n, scale: 7 });
    expect(parseDecimal('2.5e3')).toEqual({ coef: 2500n, scale: 0 });
    expect(parseDecimal('.5')).toEqual({ coef: 5n, scale: 1 });
    expect(parseDecimal('0')).toEqual({ coef: 0n, scale: 0 });
    expect(parseDecimal(' 7 ')).toEqual({ coef: 7n, scale: 0 });
  });

  it('rejects what is not a non-negative decimal', () => {
    for (const bad of ['', '-1', '1,5', 'abc', '1.', '+1', 'NaN', '0x10', '1e'])
      expect(parseDecimal(bad), bad).toBeNull();
    for (const bad of [-0.5, Number.NaN, Infinity]) expect(parseDecimal(bad), String(bad)).toBeNull();
  });

  it('refuses text past 64 characters or an exponent past ±100 before making a number of it', () => {
    const t0 = performance.now();
    for (const big of ['9'.repeat(1_000_000), `0.${'1'.repeat(65)}`, `1e${'0'.repeat(63)}1`, '1e-300000000', '1e101'])
      expect(parseDecimal(big), big.slice(0, 20)).toBeNull();
    expect(performance.now() - t0).toBeLessThan(1_000); // a million digits as a BigInt: seconds
    expect(parseDecimal(`0.${'0'.repeat(20)}1`)).toEqual({ coef: 1n, scale: 21 });
  });

  it('formats', () => {
    expect(formatDec({ coef: 3625n, scale: 6 })).toBe('0.003625');
    expect(formatDec({ coef: 2250n, scale: 2 })).toBe('22.5');
    expect(formatFixed(12345n, 8)).toBe('0.00012345');
    expect(formatFixed(123456789012n, 8)).toBe('1234.56789012');
    expect(formatFixed(0n, 8)).toBe('0.00000000');
  });

  it('has every power of ten, asked in any order, past its table too', () => {
    for (const k of [20, 3, 0, 64, 65, 100, 21, 1]) expect(pow10(k)).toBe(10n ** BigInt(k));
  });

  it('divides with half-even rounding', () => {
    expect(divRoundHalfEven(5n, 10n)).toBe(0n); // 0.5 → 0
    expect(divRoundHalfEven(15n, 10n)).toBe(2n); // 1.5 → 2
    expect(divRoundHalfEven(25n, 10n)).toBe(2n); // 2.5 → 2
    expect(divRoundHalfEven(251n, 100n)).toBe(3n); // 2.51 → 3
    expect(divRoundHalfEven(249n, 100n)).toBe(2n); // 2.49 → 2
    expect(divRoundHalfEven(7n, 2n)).toBe(4n); // 3.5 → 4
    expect(divRoundHalfEven(0n, 3n)).toBe(0n);
  });

  it('builds exact discount ratios', () => {
    expect(discountRatio(parseDecimal('12.5')!)).toEqual({ num: 875n, den: 1000n });
    expect(discountRatio(parseDecimal(100)!)).toEqual({ num: 0n, den: 100n });
  });
});
