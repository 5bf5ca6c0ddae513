/** What `meter pricing show <provider> <model>` prints: the effective price of every token class. */
import { classPrice, selectEntry } from './cost.js';
import { formatDec, mulRatioExact, type Dec } from './decimal.js';
import type { Pricer } from './pricer.js';
import type { ProviderSlug } from '../providers/types.js';
import { PRICE_CLASSES, type PriceClass, type PriceConstraint, type ResolvedModel } from './types.js';
import { TOKEN_CLASSES, UNITS } from './units.js';

const LABEL: Readonly<Record<PriceClass, string>> = {
  input: 'input (uncached)',
  cache_read: 'cache read',
  cache_write: 'cache write (5m)',
  cache_write_1h: 'cache write (1h)',
  input_audio: 'audio input',
  cache_audio_read: 'audio cache read',
  input_image: 'image input',
  cache_image_read: 'image cache read',
  input_video: 'video input',
  output: 'output (incl. reasoning)',
  output_audio: 'audio output',
  output_image: 'image output',
  output_video: 'video output',
  web_search: 'web search (per 1K calls)',
  social_search: 'X search (per 1K calls)',
  storage_search: 'file search (per 1K calls)',
  rerank_search: 'rerank search (per 1K searches)',
  request: 'request (per 1K calls)',
};

export interface PriceRowJson {
  class: PriceClass;
  /** USD per million tokens after any discount, exact; for calls (searches, requests): USD per
   *  thousand calls. */
  usd_per_mtok: string;
  /** Set for per-call classes: the price is per this many calls (1000). */
  per_calls?: number;
  /** Set when the class has no price of its own and is billed as another class. */
  billed_as?: PriceClass;
  /** Long-context tiers: above this many total input tokens the whole request uses usd_per_mtok. */
  tiers: { above_input_tokens: number; usd_per_mtok: string }[];
}

export interface PriceTableJson {
  provider: ProviderSlug;
  model: string;
  priced: boolean;
  matched_model: string | null;
  source: 'catalogue' | 'override' | null;
  same_as: string | null;
  discount_pct: string | null;
  price_version: string;
  /** The moment the prices were selected for (dated and time-of-day prices). */
  at: string;
  /** When this price applies, if the model's price depends on the date or time of day. */
  applies: string | null;
  /** Other prices of the same model, for other dates or times of day. */
  other_periods: string[];
  prices: PriceRowJson[];
}

function describeConstraint(c: PriceConstraint | undefined): string {
  if (!c) return 'default';
  if (c.type === 'start_date') return `from ${c.startDate}`;
  return `${c.startTime}–${c.endTime} daily`;
}

function effective(d: Dec, r: ResolvedModel): string {
  return formatDec(r.discount ? mulRatioExact(d, r.discount.ratio) : d);
}

/** The price table of a provider's model at a moment (default: now). */
export function priceTable(
  pricer: Pricer,
  provider: ProviderSlug,
  model: string,
  at: Date = new Date(),
): PriceTableJson {
  const base: PriceTableJson = {
    provider,
    model,
    priced: false,
    matched_model: null,
    source: null,
    same_as: null,
    discount_pct: null,
    price_version: pricer.priceVersion,
    at: at.toISOString(),
    applies: null,
    other_periods: [],
    prices: [],
  };
  const r = pricer.resolve(provider, model);
  if (!r) return base;
  const { resolved } = r;
  const entry = selectEntry(resolved.model, at);
  const prices: PriceRowJson[] = [];
  for (const cls of PRICE_CLASSES) {
    // Token classes always (billed as their parent without a price); other units when priced.
    const p = TOKEN_CLASSES.includes(cls)
      ? classPrice(entry.prices, cls)
      : entry.prices[cls] && { price: entry.prices[cls], from: cls };
    if (!p) continue;
    const row: PriceRowJson = {
      class: cls,
      usd_per_mtok: effective(p.price.base, resolved),
      tiers: p.price.tiers.map((t) => ({ above_input_tokens: t.start, usd_per_mtok: effective(t.price, resolved) })),
    };
    if (UNITS[cls].per === 1_000) row.per_calls = 1_000;
    if (p.from !== cls) row.billed_as = p.from;
    prices.push(row);
  }
  const multi = resolved.model.entries.length > 1;
  return {
    ...base,
    priced: true,
    matched_model: r.matchedModel,
    source: resolved.source,
    same_as: resolved.sameAs ?? null,
    discount_pct: resolved.discount ? formatDec(resolved.discount.pct) : null,
    applies: multi ? describeConstraint(entry.constraint) : null,
    other_periods: multi
      ? resolved.model.entries.filter((e) => e !== entry).map((e) => describeConstraint(e.constraint))
      : [],
    prices,
  };
}

function pad(rows: string[][]): string[] {
  const widths: number[] = [];
  for (const row of rows) row.forEach((c, i) => (widths[i] = Math.max(widths[i] ?? 0, c.length)));
  return rows.map((row) =>
    row
      .map((c, i) => (i === row.length - 1 ? c : c.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd(),
  );
}

/** Plain text for a terminal. */
export function renderPriceTable(t: PriceTableJson): string {
  if (!t.priced) {
    return `${t.provider} ${t.model}: no price (unknown model; calls are recorded at cost 0 and flagged unpriced)\nprice table: ${t.price_version}\n`;
  }
  const lines: string[] = [];
  const origin = t.source === 'override' ? 'prices file' : 'catalogue';
  lines.push(`${t.provider} ${t.model} → ${t.matched_model} (${origin}${t.same_as ? `, same as ${t.same_as}` : ''})`);
  if (t.discount_pct) lines.push(`discount: ${t.discount_pct}% (prices below include it)`);
  lines.push(`price table: ${t.price_version}, at ${t.at}`);
  if (t.applies) lines.push(`applies: ${t.applies}; other periods: ${t.other_periods.join(', ')}`);
  const thresholds = [...new Set(t.prices.flatMap((p) => p.tiers.map((x) => x.above_input_tokens)))].sort(
    (a, b) => a - b,
  );
  const header = ['billed unit', 'USD / 1M tokens', ...thresholds.map((n) => `> ${n} input tokens`)];
  const rows = t.prices.map((p) => {
    const cells = [LABEL[p.class], p.usd_per_mtok + (p.billed_as ? ` (as ${p.billed_as})` : '')];
    let current = p.usd_per_mtok;
    for (const n of thresholds) {
      current = p.tiers.find((x) => x.above_input_tokens === n)?.usd_per_mtok ?? current;
      cells.push(current);
    }
    return cells;
  });
  lines.push(...pad([header, ...rows]));
  return lines.join('\n') + '\n';
}

/** For `meter pricing show <provider> <model> [--json]`: the text to print and the JSON value. */
export function formatPriceTable(
  pricer: Pricer,
  provider: ProviderSlug,
  model: string,
  at: Date = new Date(),
): { text: string; json: PriceTableJson } {
  const json = priceTable(pricer, provider, model, at);
  return { text: renderPriceTable(json), json };
}
