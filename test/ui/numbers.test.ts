/** The spend page's money: the API's exact decimal text kept and shown in full, sums exact. */
import { describe, expect, it } from 'vitest';
import { decimalsFor, fromUnits, parseJson, toUnits, usd } from '../../ui/numbers.js';

describe("the spend page's numbers", () => {
  it('keeps every decimal the API wrote, and at least cents', () => {
    expect(usd('0.0000475')).toBe('$0.0000475');
    expect(usd('0.00000001')).toBe('$0.00000001');
    expect(usd('5')).toBe('$5.00');
    expect(usd('12.5')).toBe('$12.50');
    expect(usd('1234567.12345678')).toBe('$1,234,567.12345678');
    expect(usd('-0.0000225')).toBe('−$0.0000225');
    expect(usd(null)).toBe('—');
  });

  it('parses money as the text the API wrote, other numbers as numbers', () => {
    // Where the runtime has JSON.parse source access (browsers), the text is the source; else
    // the float written back to the API's 8 decimals, which is the same text for 8-dp amounts.
    const body = parseJson('{"spend":0.00000001,"requests":3,"by_model":[{"spend":0.1,"cost":12345.6789}]}') as {
      spend: string;
      requests: number;
      by_model: { spend: string; cost: string }[];
    };
    expect(body).toEqual({ spend: '0.00000001', requests: 3, by_model: [{ spend: '0.1', cost: '12345.6789' }] });
  });

  it('sums in integers of 1e-8 dollars: 0.1 + 0.2 is 0.3', () => {
    expect(fromUnits(toUnits('0.1') + toUnits('0.2'))).toBe('0.30000000');
    expect(fromUnits(toUnits('0.00000001') * 3n)).toBe('0.00000003');
    expect(fromUnits(toUnits('-1.5') + toUnits('0.25'))).toBe('-1.25000000');
  });

  it("gives the chart's axis the decimals its step needs", () => {
    expect(decimalsFor(0.00025)).toBe(5);
    expect(decimalsFor(0.5)).toBe(2);
    expect(decimalsFor(10)).toBe(2);
    expect(decimalsFor(2.5e-7)).toBe(8);
    expect(decimalsFor(0.1 + 0.2)).toBe(2);
  });
});
