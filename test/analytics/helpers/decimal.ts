/** Exact USD arithmetic for expected values: integer units of 1e-8, the NUMERIC(20,8) scale. */

export function toUnits(decimal: string): bigint {
  const [int = '0', frac = ''] = decimal.split('.');
  return BigInt(int + frac.padEnd(8, '0'));
}

/** The text the API writes: no trailing fraction zeros, no bare point. */
export function fromUnits(units: bigint): string {
  const neg = units < 0n;
  const digits = (neg ? -units : units).toString().padStart(9, '0');
  const int = digits.slice(0, -8).replace(/^0+(?=\d)/, '');
  const frac = digits.slice(-8).replace(/0+$/, '');
  return `${neg ? '-' : ''}${int}${frac ? `.${frac}` : ''}`;
}

export function sumUsd(values: string[]): string {
  return fromUnits(values.reduce((s, v) => s + toUnits(v), 0n));
}
