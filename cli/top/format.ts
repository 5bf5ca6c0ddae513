/** Text for the frame: money rounded half-even from exact decimals, counts, durations, bars. */
import { printable } from '../../src/printable.js';
import { divRoundHalfEven, toUnits } from '../../src/money.js';

const group = (digits: string) => digits.replace(/\B(?=(\d{3})+(?!\d))/g, ',');

/** "$1,234.57" from exact decimal text, `decimals` places, half-even. */
export function usd(decimal: string, decimals = 2): string {
  const units = toUnits(decimal);
  const scaled = divRoundHalfEven(units, 10n ** BigInt(8 - decimals));
  const digits = scaled.toString().padStart(decimals + 1, '0');
  const int = group(digits.slice(0, digits.length - decimals));
  return decimals === 0 ? `$${int}` : `$${int}.${digits.slice(-decimals)}`;
}

/** Totals: cents from a dollar up; under a dollar 4 places, or as many (up to 8, exact) as show
 *  two significant digits, so a small spend or budget is never shown as $0.0000. */
export function usdTotal(decimal: string): string {
  const units = toUnits(decimal);
  if (units >= 100_000_000n) return usd(decimal, 2);
  if (units === 0n) return usd(decimal, 4);
  return usd(decimal, Math.min(8, Math.max(4, 8 - units.toString().length + 2)));
}

export const count = (n: string | number) => group(String(n));

/** A count in at most 7 characters: 999,999, then 1.05M (truncated, never rounded up). */
export function countShort(n: string): string {
  const v = BigInt(n);
  if (v < 1_000_000n) return count(n);
  const hundredths = v / 10_000n;
  return `${hundredths / 100n}.${(hundredths % 100n).toString().padStart(2, '0')}M`;
}

export function ms(v: number | null): string {
  if (v === null) return '-';
  if (v < 1000) return `${Math.round(v)}ms`;
  return v < 60_000 ? `${(v / 1000).toFixed(1)}s` : `${Math.round(v / 1000)}s`;
}

export const pct = (v: number | null) => (v === null ? '-' : `${v}%`);

/** Exactly `width` characters: padded, or cut with an ellipsis. */
export function fit(raw: string, width: number, align: 'left' | 'right' = 'left'): string {
  if (width <= 0) return '';
  const text = printable(raw); // measured as it will be drawn
  if (text.length > width) return width === 1 ? '…' : `${text.slice(0, width - 1)}…`;
  return align === 'left' ? text.padEnd(width) : text.padStart(width);
}

/** At most `width` characters, cut in the middle so both ends stay (`llama-3…ersatile`). */
export function fitMiddle(text: string, width: number): string {
  if (text.length <= width) return text;
  if (width <= 1) return width === 1 ? '…' : '';
  const head = Math.ceil((width - 1) / 2);
  const tail = width - 1 - head;
  return `${text.slice(0, head)}…${tail > 0 ? text.slice(-tail) : ''}`;
}

/** A model's name in at most `width` characters: `provider/model` when it fits, else the model
 *  alone, else without a dated snapshot suffix, else cut in the middle. Two models never look
 *  the same because their common start was all that was left. */
export function modelName(provider: string | undefined, model: string, width: number): string {
  const undated = model.replace(/-(\d{8}|\d{4}-\d{2}-\d{2})$/, '');
  for (const name of [provider ? `${provider}/${model}` : model, model, undated]) if (name.length <= width) return name;
  return fitMiddle(undated, width);
}

const SPARKS = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

/** One character per value, scaled to the largest; blank for zero. */
export function sparkline(values: readonly string[]): string {
  const units = values.map(toUnits);
  const max = units.reduce((a, b) => (b > a ? b : a), 0n);
  if (max === 0n) return ' '.repeat(values.length);
  return units.map((u) => (u === 0n ? ' ' : SPARKS[Number((u * 8n + max - 1n) / max) - 1]!)).join('');
}

/**
 * The budget bar: `width` cells filled in proportion to spend / budget (capped at full), with
 * marks at 50% and 80%; 100% is the bar's end. Returns the filled and the empty part.
 */
export function budgetBar(spend: string, budget: string, width: number): { filled: string; empty: string } {
  const s = toUnits(spend);
  const b = toUnits(budget);
  const cells = Number(s >= b ? BigInt(width) : (s * BigInt(width)) / b);
  const marks = new Set([Math.round(width * 0.5), Math.round(width * 0.8)]);
  const cell = (i: number, on: boolean) => (marks.has(i) ? '│' : on ? '█' : '░');
  let filled = '';
  let empty = '';
  for (let i = 0; i < width; i++) {
    if (i < cells) filled += cell(i, true);
    else empty += cell(i, false);
  }
  return { filled, empty };
}
