/**
 * The billed units a price can name, with the dimensions @pydantic/genai-prices gives them
 * (its unit registry is not exported, so the part we meter is mirrored here). A unit is part of
 * every unit whose dimensions are a subset of its own: cached audio is part of cache reads and of
 * audio input, both part of input. A call's usage is split into disjoint leaves the way the
 * catalogue does it: each priced unit keeps what its priced sub-units do not take, so a unit
 * without a price of its own is billed at the price of the unit that contains it.
 */
import type { ExtraUnit, Usage } from '../providers/types.js';

export const PRICE_CLASSES = [
  'input', 'cache_read', 'cache_write', 'cache_write_1h',
  'input_audio', 'cache_audio_read', 'input_image', 'cache_image_read', 'input_video',
  'output', 'output_audio', 'output_image', 'output_video',
  'web_search', 'request',
] as const;
export type PriceClass = (typeof PRICE_CLASSES)[number];

/** The classes every model is shown with (billed as their parent when they have no price). */
export const TOKEN_CLASSES: readonly PriceClass[] = ['input', 'cache_read', 'cache_write', 'cache_write_1h', 'output'];

type Dims = Readonly<Record<string, string>>;

export interface UnitDef {
  cls: PriceClass;
  /** genai-prices' usage key, and the key in an event's `units`. */
  usageKey: string;
  /** genai-prices' price key, and the field of a METER_PRICES_FILE model entry. */
  priceKey: string;
  /** Prices are per this many units: 1e6 tokens, 1e3 calls. */
  per: 1_000_000 | 1_000;
  dims: Dims;
  /** Tokens are re-priced by long-context tiers and service tiers; calls are not. */
  tokens: boolean;
}

const tok = (cls: PriceClass, usageKey: string, priceKey: string, dims: Dims): UnitDef =>
  ({ cls, usageKey, priceKey, per: 1_000_000, dims: { family: 'tokens', ...dims }, tokens: true });
const per1k = (cls: PriceClass, usageKey: string, priceKey: string, dims: Dims): UnitDef =>
  ({ cls, usageKey, priceKey, per: 1_000, dims, tokens: false });

export const UNITS: Readonly<Record<PriceClass, UnitDef>> = {
  input: tok('input', 'input_tokens', 'input_mtok', { direction: 'input' }),
  cache_read: tok('cache_read', 'cache_read_tokens', 'cache_read_mtok', { direction: 'input', token_type: 'cache_read' }),
  cache_write: tok('cache_write', 'cache_write_tokens', 'cache_write_mtok', { direction: 'input', token_type: 'cache_write' }),
  cache_write_1h: tok('cache_write_1h', 'cache_write_1h_tokens', 'cache_write_1h_mtok', { direction: 'input', token_type: 'cache_write', cache_ttl: '1h' }),
  input_audio: tok('input_audio', 'input_audio_tokens', 'input_audio_mtok', { direction: 'input', modality: 'audio' }),
  cache_audio_read: tok('cache_audio_read', 'cache_audio_read_tokens', 'cache_audio_read_mtok', { direction: 'input', modality: 'audio', token_type: 'cache_read' }),
  input_image: tok('input_image', 'input_image_tokens', 'input_image_mtok', { direction: 'input', modality: 'image' }),
  cache_image_read: tok('cache_image_read', 'cache_image_read_tokens', 'cache_image_read_mtok', { direction: 'input', modality: 'image', token_type: 'cache_read' }),
  input_video: tok('input_video', 'input_video_tokens', 'input_video_mtok', { direction: 'input', modality: 'video' }),
  output: tok('output', 'output_tokens', 'output_mtok', { direction: 'output' }),
  output_audio: tok('output_audio', 'output_audio_tokens', 'output_audio_mtok', { direction: 'output', modality: 'audio' }),
  output_image: tok('output_image', 'output_image_tokens', 'output_image_mtok', { direction: 'output', modality: 'image' }),
  output_video: tok('output_video', 'output_video_tokens', 'output_video_mtok', { direction: 'output', modality: 'video' }),
  web_search: per1k('web_search', 'web_searches', 'web_searches_kcount', { family: 'tool_calls', tool_type: 'web_search' }),
  request: per1k('request', 'requests', 'requests_kcount', { family: 'requests' }),
};

/** `a` contains `b`: every dimension of `a` is one of `b`'s, with the same value. */
function contains(a: UnitDef, b: UnitDef): boolean {
  return a !== b && Object.entries(a.dims).every(([k, v]) => b.dims[k] === v);
}

/** For each class, the classes it contains (its sub-units). */
export const SUB_UNITS: Readonly<Record<PriceClass, readonly PriceClass[]>> = Object.fromEntries(
  PRICE_CLASSES.map((c) => [c, PRICE_CLASSES.filter((d) => contains(UNITS[c], UNITS[d]))]),
) as Record<PriceClass, PriceClass[]>;

/** For each class, the classes that contain it, least specific first. */
export const SUPER_UNITS: Readonly<Record<PriceClass, readonly PriceClass[]>> = Object.fromEntries(
  PRICE_CLASSES.map((c) => [c, PRICE_CLASSES.filter((a) => contains(UNITS[a], UNITS[c]))
    .sort((x, y) => Object.keys(UNITS[x].dims).length - Object.keys(UNITS[y].dims).length)]),
) as Record<PriceClass, PriceClass[]>;

/** The extra units of a Usage, by class (the rest come from its token fields). */
const EXTRA_CLASS: Readonly<Record<ExtraUnit, PriceClass | null>> = {
  input_audio_tokens: 'input_audio',
  cache_audio_read_tokens: 'cache_audio_read',
  input_image_tokens: 'input_image',
  cache_image_read_tokens: 'cache_image_read',
  input_video_tokens: 'input_video',
  output_audio_tokens: 'output_audio',
  output_image_tokens: 'output_image',
  output_video_tokens: 'output_video',
  web_searches: 'web_search',
  web_fetches: null,
};

/** Whole non-negative counts; anything else a provider might send counts as 0. */
function count(n: number | undefined): number {
  if (n === undefined || !Number.isFinite(n) || n <= 0) return 0;
  return Math.min(Math.round(n), Number.MAX_SAFE_INTEGER);
}

/** Every class's total as reported (a call is one request), clamped so no part exceeds a whole
 *  that contains it: metering never throws on inconsistent counts. */
export function unitTotals(usage: Usage): Record<PriceClass, number> {
  const t = Object.fromEntries(PRICE_CLASSES.map((c) => [c, 0])) as Record<PriceClass, number>;
  t.input = count(usage.inputTokens);
  t.cache_read = count(usage.cachedInputTokens);
  t.cache_write = count(usage.cacheWriteTokens);
  t.cache_write_1h = count(usage.cacheWrite1hTokens);
  t.output = count(usage.outputTokens);
  t.request = 1;
  if (usage.units) {
    for (const [k, v] of Object.entries(usage.units) as [ExtraUnit, number][]) {
      const cls = EXTRA_CLASS[k];
      if (cls) t[cls] = count(v);
    }
  }
  for (const c of PRICE_CLASSES) for (const sup of SUPER_UNITS[c]) if (t[c] > t[sup]) t[c] = t[sup];
  t.cache_write = Math.min(t.cache_write, t.input - t.cache_read);
  t.cache_write_1h = Math.min(t.cache_write_1h, t.cache_write);
  return t;
}

/**
 * The disjoint leaves of a call for a model's priced classes (most specific first): each priced
 * class keeps its total minus what its priced sub-units took. Cache reads and writes together
 * never exceed input: a write is clamped to what reads leave.
 */
export function unitLeaves(totals: Record<PriceClass, number>, priced: readonly PriceClass[]): Map<PriceClass, number> {
  const order = [...priced].sort((a, b) => Object.keys(UNITS[b].dims).length - Object.keys(UNITS[a].dims).length);
  const leaves = new Map<PriceClass, number>();
  for (const c of order) {
    let v = totals[c];
    for (const d of SUB_UNITS[c]) v -= leaves.get(d) ?? 0;
    leaves.set(c, Math.max(0, v));
  }
  return leaves;
}
