/** Loading METER_PRICES_FILE: read once at start, validate, compile to exact prices. */
import { MeterError } from '../errors.js';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { extname } from 'node:path';
import { discountRatio, parseDecimal, type Dec } from './decimal.js';
import {
  PRICE_FIELDS,
  formatPath,
  pricesFileSchema,
  type ModelOverrideInput,
  type PriceField,
  type PricesFile,
} from './overrides-schema.js';
import type { ProviderSlug } from '../providers/types.js';
import type { CompiledModel, PriceSet, ResolvedModel, TieredDec } from './types.js';
import { PRICE_CLASSES, SELF_SUFFICIENT_CLASSES, UNITS, type PriceClass } from './units.js';

export const PRICES_FILE_ENV = 'METER_PRICES_FILE';

/** A prices file that cannot be used. The message names the file, the place and what is allowed. */
export class PricesFileError extends MeterError {
  override name = 'PricesFileError';
  constructor(
    readonly file: string,
    readonly problems: { path: string; message: string }[],
    label: string,
  ) {
    const where = `${label} ${file}`;
    const lines = problems.map((p) => (p.path ? `  ${p.path}: ${p.message}` : `  ${p.message}`));
    super(
      problems.length === 1 && !problems[0]!.path
        ? `${where}: ${problems[0]!.message}`
        : `${where} is invalid:\n${lines.join('\n')}`,
    );
    this.name = 'PricesFileError';
  }
}

export type Discount = NonNullable<ResolvedModel['discount']>;

export type ModelOverride =
  /** Explicit prices from the file. */
  | { key: string; kind: 'prices'; model: CompiledModel; discount?: Discount }
  /** The catalogue's price of `sameAs` (or of the priced name itself), optionally discounted,
   *  plus `extra` prices of units the catalogue lacks (a Gemini grounding price). */
  | { key: string; kind: 'catalogue'; sameAs?: string; discount?: Discount; extra?: PriceSet };

export interface ProviderOverrides {
  discount?: Discount;
  exact: Map<string, ModelOverride>;
  /** Longest prefix first, so the most specific wildcard wins. */
  prefixes: { prefix: string; override: ModelOverride }[];
}

export interface Overrides {
  providers: Partial<Record<ProviderSlug, ProviderOverrides>>;
  /** First 8 hex digits of the SHA-256 of the file's bytes: part of the price version. */
  hash: string;
  file: string;
}

const FIELD_CLASS = Object.fromEntries(PRICE_CLASSES.map((c) => [UNITS[c].priceKey, c])) as Readonly<
  Record<PriceField, PriceClass>
>;

/** Reads and validates a prices file (JSON by .json, YAML by .yaml/.yml, else by its first character). */
export function loadOverridesFile(file: string, label = PRICES_FILE_ENV): Overrides {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new PricesFileError(file, [{ path: '', message: `cannot read the file (${code ?? String(err)})` }], label);
  }
  return parseOverrides(text, file, label);
}

/** Validates prices-file text; `file` only names it in errors and picks the syntax. */
export function parseOverrides(text: string, file: string, label = PRICES_FILE_ENV): Overrides {
  const raw = parseText(text, file, label);
  const result = pricesFileSchema.safeParse(raw);
  if (!result.success) {
    const problems = result.error.issues.map((i) => ({ path: formatPath(i.path), message: i.message }));
    throw new PricesFileError(file, problems, label);
  }
  const hash = createHash('sha256').update(text).digest('hex').slice(0, 8);
  return { providers: compile(result.data), hash, file };
}

/** yaml is loaded only for a YAML prices file (synchronously: the pricer is built at start). */
let yamlModule: typeof import('yaml') | undefined;
const yaml = () => (yamlModule ??= createRequire(import.meta.url)('yaml') as typeof import('yaml'));

function parseText(text: string, file: string, label: string): unknown {
  const ext = extname(file).toLowerCase();
  const json = ext === '.json' || (ext !== '.yaml' && ext !== '.yml' && /^\s*[{[]/.test(text));
  if (!text.trim()) {
    throw new PricesFileError(
      file,
      [{ path: '', message: 'the file is empty; expected a mapping with a top-level `providers` key' }],
      label,
    );
  }
  try {
    return json ? JSON.parse(text) : yaml().parse(text);
  } catch (err) {
    const kind = json ? 'JSON' : 'YAML';
    let message = err instanceof Error ? err.message : String(err);
    // yaml's message is 'problem at line L, column C:' followed by a source excerpt; keep the first line.
    if (!json && err instanceof yaml().YAMLError) message = message.split('\n')[0]!.replace(/:$/, '');
    throw new PricesFileError(file, [{ path: '', message: `not valid ${kind}: ${message}` }], label);
  }
}

function dec(v: string | number): Dec {
  // Validated by the schema already.
  return parseDecimal(v)!;
}

function discountOf(v: string | number | undefined): Discount | undefined {
  if (v === undefined) return undefined;
  const pct = dec(v);
  return { pct, ratio: discountRatio(pct) };
}

function compileModel(key: string, m: ModelOverrideInput): ModelOverride {
  const discount = discountOf(m.discount_pct);
  const given = PRICE_FIELDS.filter((f) => m[f] !== undefined);
  // Without an input or output price the entry adds prices to the catalogue's, not replaces them.
  if (!given.includes('input_mtok') && !given.includes('output_mtok') && !m.tiers) {
    const o: ModelOverride = { key, kind: 'catalogue' };
    if (m.same_as !== undefined) o.sameAs = m.same_as;
    if (discount) o.discount = discount;
    if (given.length) {
      o.extra = {};
      for (const f of given) o.extra[FIELD_CLASS[f]] = { base: dec(m[f]!), tiers: [] };
    }
    return o;
  }
  const prices: PriceSet = {};
  for (const f of given) {
    const t: TieredDec = { base: dec(m[f]!), tiers: [] };
    // A class a tier leaves out keeps the price it had below that tier.
    let current = t.base;
    for (const tier of m.tiers ?? []) {
      const v = tier[f];
      if (v !== undefined) current = dec(v);
      t.tiers.push({ start: tier.above_input_tokens, price: current });
    }
    prices[FIELD_CLASS[f]] = t;
  }
  const o: ModelOverride = { key, kind: 'prices', model: { id: key, entries: [{ prices }] } };
  if (discount) o.discount = discount;
  return o;
}

function compile(file: PricesFile): Overrides['providers'] {
  const out: Overrides['providers'] = {};
  for (const [slug, p] of Object.entries(file.providers) as [ProviderSlug, PricesFile['providers'][ProviderSlug]][]) {
    if (!p) continue;
    const po: ProviderOverrides = { exact: new Map(), prefixes: [] };
    const d = discountOf(p.discount_pct);
    if (d) po.discount = d;
    for (const [rawKey, m] of Object.entries(p.models ?? {})) {
      const key = rawKey.trim();
      const norm = key.toLowerCase();
      const o = compileModel(key, m);
      if (norm.endsWith('*')) po.prefixes.push({ prefix: norm.slice(0, -1), override: o });
      else po.exact.set(norm, o);
    }
    po.prefixes.sort((a, b) => b.prefix.length - a.prefix.length);
    out[slug] = po;
  }
  return out;
}

/**
 * An entry of unit prices only, for a model the catalogue does not know: those prices are the
 * model's whole price when they can price a call on their own (a rerank model's per-search
 * price); a web search price alone cannot, so such a model stays unpriced.
 */
export function standaloneModel(o: ModelOverride): CompiledModel | undefined {
  if (o.kind !== 'catalogue' || o.sameAs !== undefined || !o.extra) return undefined;
  const extra = o.extra;
  if (!SELF_SUFFICIENT_CLASSES.some((c) => extra[c] !== undefined)) return undefined;
  return { id: o.key, entries: [{ prices: extra }] };
}

/** The override for a normalised model name: exact name first, then the longest matching prefix. */
export function findOverride(p: ProviderOverrides | undefined, name: string): ModelOverride | undefined {
  if (!p) return undefined;
  const exact = p.exact.get(name);
  if (exact) return exact;
  for (const { prefix, override } of p.prefixes) if (name.startsWith(prefix)) return override;
  return undefined;
}
