/** `meter top`'s money: exact decimals rounded half-even, with enough places to be true. */
import { describe, expect, it } from 'vitest';
import { usdTotal } from '../../cli/top/format.js';

describe('usdTotal', () => {
  it.each([
    ['21224.32', '$21,224.32'],
    ['1', '$1.00'],
    ['0.5', '$0.5000'],
    ['0.0123', '$0.0123'],
    // under a hundredth of a cent: two significant digits, not $0.0000
    ['0.00001425', '$0.000014'],
    ['0.00005', '$0.000050'],
    ['0.000009', '$0.0000090'],
    ['0.00000001', '$0.00000001'],
    ['0', '$0.0000'],
  ])('%s → %s', (decimal, shown) => {
    expect(usdTotal(decimal)).toBe(shown);
    expect(usdTotal(decimal).length).toBeLessThanOrEqual(11); // the spend column's width
  });
});
