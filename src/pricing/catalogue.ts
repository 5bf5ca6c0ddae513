/**
 * The `@pydantic/genai-prices` catalogue, used ONLY to select a model's prices. Its own totals
 * are floats (about 2% of calls round wrongly at the 8th decimal), so we never use them: the
 * selected price table is converted to exact decimals and priced in ./cost.ts.
 */
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { calcPrice, type ConditionalPrice, type ModelInfo, type ModelPrice } from '@pydantic/genai-prices';
import { parseDecimal, type Dec } from './decimal.js';
import { providers, PROVIDER_SLUGS, type ProviderSlug } from '../providers/index.js';
import type { CompiledModel, PriceConstraint, PriceEntry, PriceSet, TieredDec } from './types.js';
import { PRICE_CLASSES, SELF_SUFFICIENT_CLASSES, UNITS, type PriceClass } from './units.js';

/** Our slugs → the catalogue's provider ids (each provider's `catalogueId`). */
export const CATALOGUE_PROVIDER_ID: Readonly<Record<ProviderSlug, string>> = Object.fromEntries(
  PROVIDER_SLUGS.map((slug) => [slug, providers[slug].catalogueId]),
) as Record<ProviderSlug, string>;

/** Catalogue price keys for the classes we meter. Other keys (audio hours, document pages,
 *  file searches) have no counterpart in what the proxied APIs report and are ignored. */
export const CLASS_PRICE_KEY: Readonly<Record<PriceClass, string>> = Object.fromEntries(
  PRICE_CLASSES.map((c) => [c, UNITS[c].priceKey]),
) as Record<PriceClass, string>;

const PINNED_VERSION = '0.1.8';

/** The installed catalogue's version, read once from its package.json (the data carries none). */
export function catalogueVersion(): string {
  try {
    const require = createRequire(import.meta.url);
    // The package's exports map hides package.json; its entry point sits in dist/.
    const entry = require.resolve('@pydantic/genai-prices');
    const pkg = JSON.parse(readFileSync(join(dirname(entry), '..', 'package.json'), 'utf8')) as { version?: unknown };
    if (typeof pkg.version === 'string' && pkg.version) return `genai-prices@${pkg.version}`;
  } catch {
    // fall through to the pinned version
  }
  return `genai-prices@${PINNED_VERSION}`;
}

/** The lookup key for a model name: trimmed, lower-case, without Gemini's `models/` prefix. */
export function normaliseModelName(model: string): string {
  let m = model.trim().toLowerCase();
  if (m.startsWith('models/')) m = m.slice('models/'.length);
  return m;
}

/** The catalogue's model entry for a provider + model, or null. Never throws. */
export function findCatalogueModel(provider: ProviderSlug, model: string): ModelInfo | null {
  const name = normaliseModelName(model);
  if (!name) return null;
  try {
    // Empty usage: we want the matched model, not the catalogue's float arithmetic.
    const r = calcPrice({}, name, { providerId: CATALOGUE_PROVIDER_ID[provider] });
    return r ? r.model : null;
  } catch {
    return null;
  }
}

const compiled = new WeakMap<ModelInfo, CompiledModel | null>();

/** A catalogue model as exact prices; null when it has no token price we can apply. Cached per model. */
export function compileCatalogueModel(info: ModelInfo): CompiledModel | null {
  const hit = compiled.get(info);
  if (hit !== undefined) return hit;
  let result: CompiledModel | null = null;
  try {
    result = compileCatalogueModelStrict(info);
  } catch {
    result = null;
  }
  compiled.set(info, result);
  return result;
}

/** Like compileCatalogueModel, but a price that is not a valid exact decimal throws, naming it
 *  (price data files are checked with it before they are used). */
export function compileCatalogueModelStrict(info: ModelInfo): CompiledModel | null {
  const raw: ConditionalPrice[] = Array.isArray(info.prices) ? info.prices : [{ prices: info.prices }];
  const entries: PriceEntry[] = raw.map((c) => {
    if (typeof c !== 'object' || c === null || typeof c.prices !== 'object' || c.prices === null) {
      throw new Error('expected a mapping of prices');
    }
    const entry: PriceEntry = { prices: convertPrices(c.prices) };
    if (c.constraint) entry.constraint = convertConstraint(c.constraint);
    return entry;
  });
  // A model with neither token nor rerank prices (OCR pages, audio hours) cannot be priced from our usage.
  return entries.length && entries.some((e) => SELF_SUFFICIENT_CLASSES.some((c) => e.prices[c] !== undefined))
    ? { id: info.id, entries }
    : null;
}

function convertPrices(mp: ModelPrice): PriceSet {
  const out: PriceSet = {};
  for (const [cls, key] of Object.entries(CLASS_PRICE_KEY) as [PriceClass, string][]) {
    const v = mp[key];
    if (v === undefined) continue;
    out[cls] = convertTiered(v, key);
  }
  return out;
}

function convertTiered(
  v: number | { base: number; tiers: { start: number; price: number }[] },
  key: string,
): TieredDec {
  if (typeof v === 'number') return { base: dec(v, key), tiers: [] };
  if (
    typeof v !== 'object' ||
    v === null ||
    !Array.isArray(v.tiers) ||
    v.tiers.some((t) => typeof t?.start !== 'number' || !Number.isSafeInteger(t.start) || t.start < 0)
  ) {
    throw new Error(`invalid catalogue price ${key}: expected a number or {base, tiers: [{start, price}]}`);
  }
  const tiers = v.tiers.map((t) => ({ start: t.start, price: dec(t.price, key) })).sort((a, b) => a.start - b.start);
  return { base: dec(v.base, key), tiers };
}

function dec(n: number, key: string): Dec {
  const d = typeof n === 'number' ? parseDecimal(n) : null;
  if (!d) throw new Error(`invalid catalogue price ${key}: ${String(n)}`);
  return d;
}

const TIME_RE = /^(\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(Z|([+-])(\d{2}):(\d{2}))$/;

/** Seconds of the UTC day for "HH:MM:SS[.fff](Z|±HH:MM)", the catalogue's time-of-day format. */
export function parseTimeOfDay(text: string): number {
  const m = TIME_RE.exec(text);
  if (!m) throw new Error(`invalid time of day: ${text}`);
  const [h, mi, s] = [Number(m[1]), Number(m[2]), Number(m[3])];
  const offH = Number(m[7] ?? 0);
  const offM = Number(m[8] ?? 0);
  if (h > 23 || mi > 59 || s > 59 || offH > 23 || offM > 59) throw new Error(`invalid time of day: ${text}`);
  const local = h * 3600 + mi * 60 + s + Number(`0.${m[4] ?? '0'}`);
  const offset = m[5] === 'Z' ? 0 : (m[6] === '+' ? 1 : -1) * (offH * 3600 + offM * 60);
  return (((local - offset) % 86400) + 86400) % 86400;
}

export function convertConstraint(given: NonNullable<ConditionalPrice['constraint']>): PriceConstraint {
  // Older data files leave out `type`; genai-prices infers it from the fields, and so do we.
  const c =
    given.type !== undefined
      ? given
      : 'start_date' in given
        ? ({ ...(given as object), type: 'start_date' } as typeof given)
        : ({ ...(given as object), type: 'time_of_date' } as typeof given);
  if (c.type === 'start_date') {
    // Same reading as the catalogue: a bare date is midnight UTC.
    const atMs = new Date(c.start_date).getTime();
    if (Number.isNaN(atMs)) throw new Error(`invalid start date: ${c.start_date}`);
    return { type: 'start_date', startDate: c.start_date, atMs };
  }
  if (c.type === 'time_of_date') {
    return {
      type: 'time_of_day',
      startTime: c.start_time,
      endTime: c.end_time,
      startS: parseTimeOfDay(c.start_time),
      endS: parseTimeOfDay(c.end_time),
    };
  }
  throw new Error(`unknown price constraint ${JSON.stringify(c)}`);
}
