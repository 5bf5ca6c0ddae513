// Exact money on the page: the API writes USD to 8 decimals from the exact decimal; the page keeps
// that text (never a float's rounding) and sums with integers of 1e-8 dollars.

/** Fields whose exact decimal text is kept (money and percentages). */
const EXACT = new Set([
  'spend',
  'amount',
  'cost',
  'budget',
  'diff_usd',
  'provider_cost',
  'meter_cost',
  'utilization_pct',
  'budget_utilization_pct',
  'diff_pct',
]);

/** JSON with money as the API wrote it: the number's own text (JSON.parse source access), or
 *  where a browser lacks it the float written back to 8 decimals, the API's precision. */
export const parseJson = (text) =>
  JSON.parse(text, (key, value, context) => {
    if (typeof value !== 'number' || !EXACT.has(key)) return value;
    if (context && typeof context.source === 'string') return context.source;
    return Number.isInteger(value) ? String(value) : value.toFixed(8).replace(/0+$/, '');
  });

const SCALE = 100000000n;

/** A decimal text as integer units of 1e-8. */
export const toUnits = (text) => {
  const s = String(text);
  const negative = s.startsWith('-');
  const [whole, frac = ''] = (negative ? s.slice(1) : s).split('.');
  const units = BigInt(whole || '0') * SCALE + BigInt((frac + '00000000').slice(0, 8));
  return negative ? -units : units;
};

export const fromUnits = (units) => {
  const negative = units < 0n;
  const abs = negative ? -units : units;
  return `${negative ? '-' : ''}${abs / SCALE}.${String(abs % SCALE).padStart(8, '0')}`;
};

const group = (digits) => digits.replace(/\B(?=(\d{3})+(?!\d))/g, ',');

/** USD as exact as given: every significant decimal kept ($0.00001234), at least cents. */
export const usd = (text) => {
  if (text === null || text === undefined) return '—';
  const s = String(text);
  const negative = s.startsWith('-');
  const [whole, frac = ''] = (negative ? s.slice(1) : s).split('.');
  return `${negative ? '−' : ''}$${group(whole)}.${frac.replace(/0+$/, '').padEnd(2, '0')}`;
};

export const pct = (text) => (text === null || text === undefined ? '—' : `${text}%`);
export const count = (n) => (n === null || n === undefined ? '—' : group(String(n)));

/** Decimals an axis needs to tell its ticks apart: a step of 0.00025 needs 5 ($0.00025, not
 *  $0.0003); at least 2, at most the API's 8. */
export const decimalsFor = (step) => {
  const s = Number((step || 1).toPrecision(6)).toString();
  const places = s.includes('e-')
    ? Number(s.split('e-')[1]) + (s.split('e')[0].split('.')[1] || '').length
    : (s.split('.')[1] || '').length;
  return Math.min(8, Math.max(2, places));
};
