import { compileCatalogueModel, findCatalogueModel, normaliseModelName } from './catalogue.js';
import { activePriceTable, priceTableGeneration } from './price-data.js';
import { COST_DECIMALS, costFraction, costLines, ZERO_COST, type PricedLine } from './cost.js';
import { divRoundHalfEven, formatFixed, type Ratio } from './decimal.js';
import { formatRatio, serviceTierRatio } from './service-tiers.js';
import {
  PRICES_FILE_ENV,
  PricesFileError,
  findOverride,
  loadOverridesFile,
  standaloneModel,
  type ModelOverride,
  type Overrides,
} from './overrides.js';
import { formatPath } from './overrides-schema.js';
import type { ProviderSlug } from '../providers/types.js';
import type { CostInput, CostResult, ResolvedModel } from './types.js';

export interface PricerOptions {
  /** A prices file (METER_PRICES_FILE): read and validated once, here. */
  pricesFile?: string;
  /** Overrides already parsed (see parseOverrides); wins over pricesFile. */
  overrides?: Overrides;
  /** How errors name the file's origin; default "METER_PRICES_FILE". */
  label?: string;
}

export interface Resolution {
  resolved: ResolvedModel;
  /** Catalogue model id, or the overrides key for explicit prices. */
  matchedModel: string;
}

/** A call priced unit by unit (Pricer.lines). */
export interface PricedCall {
  lines: PricedLine[];
  /** The catalogue model id or overrides key that priced the call. */
  matchedModel: string;
  /** The service tier's multiplier of token prices (absent: standard). */
  tier?: Ratio;
  /** The negotiated discount's multiplier of every price (absent: none). */
  discount?: Ratio;
}

/** Distinct provider+model names kept (as given); a client inventing model names cannot grow memory without bound. */
const CACHE_LIMIT = 5000;

/**
 * Prices calls. Construct once at start (overrides are loaded and checked here, so a bad file
 * stops the daemon); `cost()` is then a cached lookup plus BigInt arithmetic, with no I/O.
 */
export class Pricer {
  readonly overrides: Overrides | undefined;
  /** Resolutions by provider, then by model name as given; #cached counts them all. */
  readonly #cache = new Map<ProviderSlug, Map<string, Resolution | null>>();
  #cached = 0;
  /** Exact override keys that are catalogue model ids: an override for `gpt-4o` also prices
   *  `gpt-4o-2024-08-06`, the name OpenAI answers with. */
  readonly #byCatalogueId = new Map<string, ModelOverride>();
  readonly #label: string;
  /** The price table the cache and the version were built for (another one may be put in force). */
  #generation = -1;
  #priceVersion = '';

  constructor(options: PricerOptions = {}) {
    this.#label = options.label ?? PRICES_FILE_ENV;
    this.overrides =
      options.overrides ?? (options.pricesFile ? loadOverridesFile(options.pricesFile, this.#label) : undefined);
    this.#sync(true);
  }

  /** Names the price table in force plus the overrides: `genai-prices@0.1.8+ovr:1a2b3c4d`. */
  get priceVersion(): string {
    this.#sync(false);
    return this.#priceVersion;
  }

  /** Follows the table in force (price-data.ts): a new one empties the cache. At construction a
   *  prices file that names what the table lacks is an error; after a table change it is not
   *  (those models are then unpriced, and warned about as such). */
  #sync(strict: boolean): void {
    const gen = priceTableGeneration();
    if (gen === this.#generation) return;
    this.#generation = gen;
    this.#clearCache();
    this.#byCatalogueId.clear();
    this.#priceVersion = activePriceTable().version + (this.overrides ? `+ovr:${this.overrides.hash}` : '');
    if (!this.overrides) return;
    try {
      this.#indexCatalogueNames(this.overrides, this.#label);
    } catch (err) {
      if (strict) throw err;
    }
  }

  /** A Pricer for the daemon's environment: METER_PRICES_FILE when set. */
  static fromEnv(env: Record<string, string | undefined> = process.env): Pricer {
    const file = env[PRICES_FILE_ENV]?.trim();
    return new Pricer(file ? { pricesFile: file } : {});
  }

  /** The prices for a provider's model (overrides first, then the catalogue), or null. */
  resolve(provider: ProviderSlug, model: string): Resolution | null {
    this.#sync(false);
    // By the name as the call gave it: a hit costs no normalised copy and no joined key.
    let byName = this.#cache.get(provider);
    const hit = byName?.get(model);
    if (hit !== undefined) return hit;
    const name = normaliseModelName(model);
    if (!name) return null;
    let r: Resolution | null;
    try {
      r = this.#resolveUncached(provider, name);
    } catch {
      r = null;
    }
    if (this.#cached >= CACHE_LIMIT) {
      this.#clearCache();
      byName = undefined;
    }
    if (!byName) this.#cache.set(provider, (byName = new Map()));
    byName.set(model, r);
    this.#cached++;
    return r;
  }

  #clearCache(): void {
    this.#cache.clear();
    this.#cached = 0;
  }

  /** Exact cost of one call. Never throws: an unknown model costs "0.00000000" and is flagged unpriced. */
  cost(input: CostInput): CostResult {
    const priceVersion = this.priceVersion;
    const found = this.#resolution(input);
    const exact = found && this.#exact(found, input);
    if (!found || !exact) return { cost: ZERO_COST, unpriced: true, priceVersion };
    const result: CostResult = {
      cost: formatFixed(divRoundHalfEven(exact.num, exact.den), COST_DECIMALS),
      unpriced: false,
      priceVersion,
      matchedModel: found.r.matchedModel,
      source: found.r.resolved.source,
      pricedModel: found.name,
    };
    if (found.tier) result.tierMultiplier = formatRatio(found.tier);
    return result;
  }

  /** The cost before rounding, in units of 1e-8 USD (see costFraction), or undefined: unpriced. */
  exactCost(input: CostInput): Ratio | undefined {
    const found = this.#resolution(input);
    return found && this.#exact(found, input);
  }

  /** The call's priced units one by one, with what multiplies their prices (see costLines), or
   *  undefined: unpriced. The same resolution as cost(). */
  lines(input: CostInput): PricedCall | undefined {
    try {
      const found = this.#resolution(input);
      if (!found) return undefined;
      const { r, tier } = found;
      const call: PricedCall = { lines: costLines(r.resolved, input.usage, input.time), matchedModel: r.matchedModel };
      if (tier) call.tier = tier;
      if (r.resolved.discount) call.discount = r.resolved.discount.ratio;
      return call;
    } catch {
      return undefined;
    }
  }

  /** Never throws (a call is recorded whatever its model's name). */
  #resolution(input: CostInput): { r: Resolution; name: string; tier: Ratio | undefined } | undefined {
    try {
      let name = input.model;
      let r = name ? this.resolve(input.provider, name) : null;
      if (!r) {
        name = input.requestedModel;
        r = name ? this.resolve(input.provider, name) : null;
      }
      if (r && name)
        return { r, name, tier: serviceTierRatio(input.provider, input.usage.serviceTier, r.resolved.model.id) };
    } catch {
      // an event is still recorded, flagged unpriced
    }
    return undefined;
  }

  #exact(found: { r: Resolution; tier: Ratio | undefined }, input: CostInput): Ratio | undefined {
    try {
      return costFraction(found.r.resolved, input.usage, input.time, found.tier);
    } catch {
      return undefined; // an event is still recorded, flagged unpriced
    }
  }

  /**
   * Order: an exact override key; an exact key naming the same catalogue model; the longest
   * prefix key (`name*`); the catalogue, with the provider's discount if any.
   */
  #resolveUncached(provider: ProviderSlug, name: string): Resolution | null {
    const po = this.overrides?.providers[provider];
    let o = po?.exact.get(name);
    const info = o ? undefined : findCatalogueModel(provider, name);
    if (!o && info) o = this.#byCatalogueId.get(`${provider}\u0000${info.id}`);
    o ??= findOverride(po, name);
    if (o?.kind === 'prices') {
      const resolved: ResolvedModel = { model: o.model, source: 'override' };
      if (o.discount) resolved.discount = o.discount;
      return { resolved, matchedModel: o.key };
    }
    const target = o?.sameAs ?? name;
    const targetInfo = target === name && info !== undefined ? info : findCatalogueModel(provider, target);
    const catalogueModel = targetInfo ? compileCatalogueModel(targetInfo) : null;
    if (!catalogueModel) {
      const alone = o ? standaloneModel(o) : undefined;
      if (!o || !alone) return null;
      const resolved: ResolvedModel = { model: alone, source: 'override' };
      if (o.discount) resolved.discount = o.discount;
      return { resolved, matchedModel: o.key };
    }
    const extra = o?.kind === 'catalogue' ? o.extra : undefined;
    const model = extra
      ? {
          id: catalogueModel.id,
          entries: catalogueModel.entries.map((e) => ({ ...e, prices: { ...e.prices, ...extra } })),
        }
      : catalogueModel;
    const resolved: ResolvedModel = { model, source: o ? 'override' : 'catalogue' };
    const discount = o?.discount ?? po?.discount;
    if (discount) resolved.discount = discount;
    if (o?.sameAs) resolved.sameAs = model.id;
    return { resolved, matchedModel: model.id };
  }

  /**
   * Indexes exact keys that are catalogue model ids, and checks that same_as
   * targets and discount-only names exist in the catalogue, so a typo fails at start.
   */
  #indexCatalogueNames(overrides: Overrides, label: string): void {
    const problems: { path: string; message: string }[] = [];
    for (const [slug, po] of Object.entries(overrides.providers) as [
      ProviderSlug,
      NonNullable<Overrides['providers'][ProviderSlug]>,
    ][]) {
      for (const [name, o] of po.exact) {
        // Only a key spelled as the catalogue's model id covers its aliases: the catalogue's loose
        // matching would otherwise let `claude-3-5-sonnet-custom` re-price every claude-3-5-sonnet call.
        const info = findCatalogueModel(slug, name);
        if (info && name === info.id.toLowerCase()) this.#byCatalogueId.set(`${slug}\u0000${info.id}`, o);
      }
      const entries = [...po.exact.values(), ...po.prefixes.map((p) => p.override)];
      for (const o of entries) {
        if (o.kind !== 'catalogue') continue;
        if (!o.sameAs && o.key.endsWith('*')) continue; // a discount on every catalogue model with this prefix
        const target = o.sameAs ?? o.key;
        const info = findCatalogueModel(slug, target);
        if (info && compileCatalogueModel(info)) continue;
        if (standaloneModel(o)) continue; // a rerank model the catalogue does not list
        const field = o.sameAs ? 'same_as' : 'discount_pct';
        problems.push({
          path: formatPath(['providers', slug, 'models', o.key, field]),
          message: `${this.catalogueName()} has no token prices for ${slug} model ${JSON.stringify(target)}; give input_mtok/output_mtok instead`,
        });
      }
    }
    if (problems.length) throw new PricesFileError(overrides.file, problems, label);
  }

  private catalogueName(): string {
    return activePriceTable().version;
  }
}
