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
  'input',
  'cache_read',
  'cache_write',
  'cache_write_1h',
  'input_audio',
  'cache_audio_read',
  'input_image',
  'cache_image_read',
  'input_video',
  'output',
  'output_audio',
  'output_image',
  'output_video',
  'web_search',
  'social_search',
  'storage_search',
  'rerank_search',
  'request',
] as const;
export type PriceClass = (typeof PRICE_CLASSES)[number];

/** The classes every model is shown with (billed as their parent when they have no price). */
export const TOKEN_CLASSES: readonly PriceClass[] = ['input', 'cache_read', 'cache_write', 'cache_write_1h', 'output'];

/** A price for one of these is enough to price a model's calls: tokens, or searches for a rerank
 *  model (which bills nothing else). A model priced only in other units (audio hours, pages) is not. */
export const SELF_SUFFICIENT_CLASSES: readonly PriceClass[] = [...TOKEN_CLASSES, 'rerank_search'];

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

const tok = (cls: PriceClass, usageKey: string, priceKey: string, dims: Dims): UnitDef => ({
  cls,
  usageKey,
  priceKey,
  per: 1_000_000,
  dims: { family: 'tokens', ...dims },
  tokens: true,
});
const per1k = (cls: PriceClass, usageKey: string, priceKey: string, dims: Dims): UnitDef => ({
  cls,
  usageKey,
  priceKey,
  per: 1_000,
  dims,
  tokens: false,
});

export const UNITS: Readonly<Record<PriceClass, UnitDef>> = {
  input: tok('input', 'input_tokens', 'input_mtok', { direction: 'input' }),
  cache_read: tok('cache_read', 'cache_read_tokens', 'cache_read_mtok', {
    direction: 'input',
    token_type: 'cache_read',
  }),
  cache_write: tok('cache_write', 'cache_write_tokens', 'cache_write_mtok', {
    direction: 'input',
    token_type: 'cache_write',
  }),
  cache_write_1h: tok('cache_write_1h', 'cache_write_1h_tokens', 'cache_write_1h_mtok', {
    direction: 'input',
    token_type: 'cache_write',
    cache_ttl: '1h',
  }),
  input_audio: tok('input_audio', 'input_audio_tokens', 'input_audio_mtok', { direction: 'input', modality: 'audio' }),
  cache_audio_read: tok('cache_audio_read', 'cache_audio_read_tokens', 'cache_audio_read_mtok', {
    direction: 'input',
    modality: 'audio',
    token_type: 'cache_read',
  }),
  input_image: tok('input_image', 'input_image_tokens', 'input_image_mtok', { direction: 'input', modality: 'image' }),
  cache_image_read: tok('cache_image_read', 'cache_image_read_tokens', 'cache_image_read_mtok', {
    direction: 'input',
    modality: 'image',
    token_type: 'cache_read',
  }),
  input_video: tok('input_video', 'input_video_tokens', 'input_video_mtok', { direction: 'input', modality: 'video' }),
  output: tok('output', 'output_tokens', 'output_mtok', { direction: 'output' }),
  output_audio: tok('output_audio', 'output_audio_tokens', 'output_audio_mtok', {
    direction: 'output',
    modality: 'audio',
  }),
  output_image: tok('output_image', 'output_image_tokens', 'output_image_mtok', {
    direction: 'output',
    modality: 'image',
  }),
  output_video: tok('output_video', 'output_video_tokens', 'output_video_mtok', {
    direction: 'output',
    modality: 'video',
  }),
  web_search: per1k('web_search', 'web_searches', 'web_searches_kcount', {
    family: 'tool_calls',
    tool_type: 'web_search',
  }),
  social_search: per1k('social_search', 'social_searches', 'social_searches_kcount', {
    family: 'tool_calls',
    tool_type: 'social_search',
  }),
  storage_search: per1k('storage_search', 'storage_searches', 'storage_searches_kcount', {
    family: 'tool_calls',
    tool_type: 'storage_search',
  }),
  rerank_search: per1k('rerank_search', 'rerank_searches', 'rerank_searches_kcount', { family: 'rerank' }),
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
  PRICE_CLASSES.map((c) => [
    c,
    PRICE_CLASSES.filter((a) => contains(UNITS[a], UNITS[c])).sort(
      (x, y) => Object.keys(UNITS[x].dims).length - Object.keys(UNITS[y].dims).length,
    ),
  ]),
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
  social_searches: 'social_search',
  storage_searches: 'storage_search',
  rerank_searches: 'rerank_search',
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
  const input = count(usage.inputTokens);
  const cacheRead = Math.min(count(usage.cachedInputTokens), input);
  const cacheWrite = Math.min(count(usage.cacheWriteTokens), input - cacheRead);
  const t: Record<PriceClass, number> = {
    input,
    cache_read: cacheRead,
    cache_write: cacheWrite,
    cache_write_1h: Math.min(count(usage.cacheWrite1hTokens), cacheWrite),
    input_audio: 0,
    cache_audio_read: 0,
    input_image: 0,
    cache_image_read: 0,
    input_video: 0,
    output: count(usage.outputTokens),
    output_audio: 0,
    output_image: 0,
    output_video: 0,
    web_search: 0,
    social_search: 0,
    storage_search: 0,
    rerank_search: 0,
    request: 1,
  };
  if (usage.units) {
    // Least specific first, so a part is clamped to its already clamped wholes.
    for (const cls of EXTRA_ORDER) {
      let v = count(usage.units[CLASS_EXTRA[cls]]);
      if (v === 0) continue;
      for (const sup of SUPER_UNITS[cls]) if (v > t[sup]) v = t[sup];
      t[cls] = v;
    }
  }
  return t;
}

const CLASS_EXTRA = Object.fromEntries(
  (Object.entries(EXTRA_CLASS) as [ExtraUnit, PriceClass | null][])
    .filter(([, c]) => c !== null)
    .map(([k, c]) => [c, k]),
) as Record<PriceClass, ExtraUnit>;
const EXTRA_ORDER = (Object.keys(CLASS_EXTRA) as PriceClass[]).sort(
  (a, b) => Object.keys(UNITS[a].dims).length - Object.keys(UNITS[b].dims).length,
);

/** A price set's classes, most specific first, each with the priced classes it contains. */
export type LeafPlan = readonly { cls: PriceClass; subs: readonly PriceClass[] }[];

export function leafPlan(priced: readonly PriceClass[]): LeafPlan {
  const order = [...priced].sort((a, b) => Object.keys(UNITS[b].dims).length - Object.keys(UNITS[a].dims).length);
  return order.map((cls) => ({ cls, subs: SUB_UNITS[cls].filter((d) => priced.includes(d)) }));
}

/**
 * The disjoint leaves of a call for a model's priced classes: each priced class keeps its total
 * minus what its priced sub-units took (the catalogue's rule).
 */
export function unitLeaves(totals: Record<PriceClass, number>, plan: LeafPlan): Map<PriceClass, number> {
  const leaves = new Map<PriceClass, number>();
  for (const { cls, subs } of plan) {
    let v = totals[cls];
    for (const d of subs) v -= leaves.get(d)!;
    leaves.set(cls, v > 0 ? v : 0);
  }
  return leaves;
}
