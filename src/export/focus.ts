/**
 * FOCUS 1.2 (FinOps Open Cost and Usage Specification) rows, as the specification's
 * `specification/columns/*.md` define them: one row per UTC day × provider × model × tag set ×
 * priced unit (input tokens, cached input tokens, output tokens, web searches, …) × unit price.
 * Each call is split into its priced units the way it was priced (src/pricing/cost.ts), so a row
 * has one list unit price and one contracted unit price, and unit price × PricingQuantity is the
 * row's cost. ListCost stays at list price when a negotiated discount (`discount_pct`) lowers
 * ContractedCost, BilledCost and EffectiveCost. docs/export.md lists the columns.
 */
import { createHash } from 'node:crypto';
import { Pricer } from '../pricing/pricer.js';
import type { PricedCall } from '../pricing/pricer.js';
import { splitUsage } from '../pricing/cost.js';
import {
  divRoundHalfEven,
  formatDec,
  formatFixed,
  normalise,
  pow10,
  type Dec,
  type Ratio,
} from '../pricing/decimal.js';
import { UNITS, type PriceClass } from '../pricing/units.js';
import { usageFromStored, type StoredUsage } from '../store/event-units.js';
import { getProvider } from '../providers/index.js';
import type { ProviderSlug } from '../providers/types.js';
import { stringTags } from '../tags.js';
import { nextDay } from './params.js';

export const FOCUS_VERSION = '1.2';

/** The specification's columns meter fills (alphabetical, as the spec lists them), then meter's own. */
export const FOCUS_COLUMNS = [
  'BilledCost',
  'BillingAccountId',
  'BillingAccountName',
  'BillingCurrency',
  'BillingPeriodEnd',
  'BillingPeriodStart',
  'ChargeCategory',
  'ChargeClass',
  'ChargeDescription',
  'ChargeFrequency',
  'ChargePeriodEnd',
  'ChargePeriodStart',
  'ConsumedQuantity',
  'ConsumedUnit',
  'ContractedCost',
  'ContractedUnitPrice',
  'EffectiveCost',
  'InvoiceIssuerName',
  'ListCost',
  'ListUnitPrice',
  'PricingCategory',
  'PricingQuantity',
  'PricingUnit',
  'ProviderName',
  'PublisherName',
  'ResourceId',
  'ResourceName',
  'ResourceType',
  'ServiceCategory',
  'ServiceName',
  'ServiceSubcategory',
  'SkuId',
  'SkuMeter',
  'SkuPriceDetails',
  'SkuPriceId',
  'Tags',
  'x_Requests',
] as const;

export type FocusColumn = (typeof FOCUS_COLUMNS)[number];

/** Free text a caller chooses (a model name): the CSV writer's formula guard applies to it.
 *  Identifiers are never altered: they start with a fixed provider slug or are UUIDs instead. */
export const FOCUS_FREE_TEXT: readonly FocusColumn[] = ['ResourceName'];

/** Who bills the usage, and the service's name (the provider's `focus`). */
function provider(slug: string): { name: string; service: string } {
  return getProvider(slug)?.focus ?? { name: slug, service: `${slug} API` };
}

/** SkuMeter per priced unit, and what one is counted in (FOCUS UnitFormat: plural, capitalised). */
const METERS: Record<PriceClass, string> = {
  input: 'Input Tokens',
  cache_read: 'Cached Input Tokens',
  cache_write: 'Cache Write Tokens',
  cache_write_1h: 'Cache Write Tokens (1 Hour)',
  input_audio: 'Audio Input Tokens',
  cache_audio_read: 'Cached Audio Input Tokens',
  input_image: 'Image Input Tokens',
  cache_image_read: 'Cached Image Input Tokens',
  input_video: 'Video Input Tokens',
  output: 'Output Tokens',
  output_audio: 'Audio Output Tokens',
  output_image: 'Image Output Tokens',
  output_video: 'Video Output Tokens',
  web_search: 'Web Searches',
  social_search: 'Social Searches',
  storage_search: 'File Searches',
  rerank_search: 'Rerank Searches',
  request: 'Requests',
};

function consumedUnit(cls: PriceClass): string {
  if (UNITS[cls].tokens) return 'Tokens';
  return cls === 'request' ? 'Requests' : 'Searches';
}

/** Prices are per million tokens or per thousand calls: the provider's own pricing unit. */
const pricingUnit = (cls: PriceClass) => `${UNITS[cls].per} ${consumedUnit(cls)}`;

/** Unit prices are written to 12 decimals (exact for every published price; a service tier's
 *  repeating ratio, such as 20/11, is rounded there). */
const PRICE_DECIMALS = 12;

function priceDec(r: Ratio): Dec {
  return normalise({ coef: divRoundHalfEven(r.num * pow10(PRICE_DECIMALS), r.den), scale: PRICE_DECIMALS });
}

const times = (a: Ratio, b: Ratio | undefined): Ratio => (b ? { num: a.num * b.num, den: a.den * b.den } : a);

/** unit price × quantity, rounded once (half-even) to 8 decimals. */
function costOf(price: Dec, quantity: Dec): string {
  const scale = price.scale + quantity.scale;
  const product = price.coef * quantity.coef;
  const units = scale >= 8 ? divRoundHalfEven(product, pow10(scale - 8)) : product * pow10(8 - scale);
  return formatFixed(units, 8);
}

/** An event as the FOCUS export reads it (src/export/rows.ts FOCUS_EVENT_COLUMNS). */
export interface FocusEvent extends StoredUsage {
  event_id: string;
  time_utc: string;
  provider: string;
  model: string;
  requested_model: string | null;
  unpriced: boolean;
  tags: Record<string, unknown> | null;
}

/** A priced unit and its prices, as the SKU columns name them: shared by every row of a day
 *  priced the same way (a day holds a few of them, whatever its number of calls). */
interface Sku {
  /** What orders a group's rows: the SKU price id, then the list and contracted prices. */
  key: string;
  cls: PriceClass;
  skuId: string;
  skuPriceId: string;
  details: string;
  list: Dec;
  contracted: Dec;
}

/** A SKU price's quantity in a group (a day's calls of one provider, model and tag set), and
 *  how many calls it comes from. A group's units are a short list: a call adds to a few. */
interface Unit {
  sku: Sku;
  quantity: number | bigint;
  calls: number;
  next: Unit | undefined;
}

/** A day's calls of one provider and model, by tag set (the Tags column's JSON). */
interface ModelDay {
  provider: string;
  model: string;
  byTags: Map<string, Unit>;
}

/** Exact counts: a number while it is one exactly, a bigint past 2^53. */
const plus = (a: number | bigint, b: number): number | bigint =>
  typeof a === 'number' && Number.isSafeInteger(a + b) ? a + b : BigInt(a) + BigInt(b);

export type FocusRow = Record<FocusColumn, string | null>;

/** The tier named in SKU price ids: a tier that changes the price, else `standard`. */
const tierName = (call: PricedCall | undefined, serviceTier: string | null) =>
  call?.tier && serviceTier ? serviceTier : 'standard';

const byText = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

const at = (day: string) => `${day}T00:00:00Z`;

/** The period columns of a day's rows: its UTC calendar month, and the day. */
function periodsOf(
  day: string,
): Pick<FocusRow, 'BillingPeriodEnd' | 'BillingPeriodStart' | 'ChargePeriodEnd' | 'ChargePeriodStart'> {
  const start = `${day.slice(0, 7)}-01`;
  const d = new Date(`${start}T00:00:00Z`);
  const end = new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1)).toISOString().slice(0, 10);
  return {
    BillingPeriodEnd: at(end),
    BillingPeriodStart: at(start),
    ChargePeriodEnd: at(nextDay(day)),
    ChargePeriodStart: at(day),
  };
}

/**
 * Collects a day's priced units and hands out its rows once the day is over, lazily: events
 * arrive in time order, and memory holds the day's groups (provider × model × tag set: the tag
 * set's JSON and a count per SKU price, a few hundred bytes each), never its events or its
 * rows. Rows are in order of provider, model, tags, SKU price id, list and contracted price.
 */
export class FocusRows {
  #day: string | undefined;
  #models = new Map<string, ModelDay>();
  #skus = new Map<string, Sku>();

  constructor(
    private readonly account: { id: string; name: string },
    private readonly pricer: Pricer,
  ) {}

  /** Adds events as it is iterated; yields the rows of the days they close. */
  *add(events: Iterable<FocusEvent>): Generator<FocusRow> {
    for (const e of events) {
      const day = e.time_utc.slice(0, 10);
      if (day !== this.#day) yield* this.end();
      this.#day = day;
      this.#addEvent(e);
    }
  }

  /** The rows of the day still open. */
  *end(): Generator<FocusRow> {
    const day = this.#day;
    if (day === undefined) return;
    const models = this.#models;
    this.#models = new Map();
    this.#skus = new Map();
    this.#day = undefined;
    const periods = periodsOf(day);
    // Keys join their parts with '\0', which no part holds: ordering keys orders by each part.
    for (const key of [...models.keys()].sort(byText)) {
      const m = models.get(key)!;
      for (const tags of [...m.byTags.keys()].sort(byText)) {
        const units: Unit[] = [];
        for (let u = m.byTags.get(tags); u; u = u.next) units.push(u);
        m.byTags.delete(tags);
        units.sort((a, b) => byText(a.sku.key, b.sku.key));
        for (const u of units) yield this.#row(periods, m, tags, u);
      }
    }
  }

  #addEvent(e: FocusEvent): void {
    const usage = usageFromStored(e);
    const slug = e.provider as ProviderSlug;
    // A call recorded without a price is shown at 0, as it counts in meter's spend.
    const call = e.unpriced
      ? undefined
      : this.pricer.lines({
          provider: slug,
          model: e.model,
          requestedModel: e.requested_model,
          usage,
          time: new Date(e.time_utc),
        });
    const modelKey = `${e.provider}\u0000${e.model}`;
    let m = this.#models.get(modelKey);
    if (!m) this.#models.set(modelKey, (m = { provider: e.provider, model: e.model, byTags: new Map() }));
    const tags = JSON.stringify(stringTags(e.tags));
    const tier = tierName(call, e.service_tier);
    const lines = call
      ? call.lines
      : [...splitUsage(usage)].filter(([, n]) => n > 0).map(([cls, quantity]) => ({ cls, quantity, price: undefined }));
    for (const line of lines) {
      const sku = this.#sku(e, call, tier, line);
      let u = m.byTags.get(tags);
      while (u && u.sku !== sku) u = u.next;
      if (u) {
        u.quantity = plus(u.quantity, line.quantity);
        u.calls += 1;
      } else m.byTags.set(tags, { sku, quantity: line.quantity, calls: 1, next: m.byTags.get(tags) });
    }
  }

  /** The SKU price a line of a call is priced by (one object per distinct price in a day). */
  #sku(
    e: FocusEvent,
    call: PricedCall | undefined,
    tier: string,
    line: { cls: PriceClass; price: Dec | undefined; above?: number; window?: string },
  ): Sku {
    const { cls, price } = line;
    let list: Dec;
    let contracted: Dec;
    const detail: Record<string, string | number> = { x_ServiceTier: tier };
    let skuPriceId = `${e.provider}/${call?.matchedModel ?? e.model}/${cls}:${tier}`;
    if (!price) {
      list = contracted = { coef: 0n, scale: 0 };
      skuPriceId += ':unpriced';
      detail.x_Unpriced = 'true';
    } else {
      const listRatio = times({ num: price.coef, den: pow10(price.scale) }, UNITS[cls].tokens ? call!.tier : undefined);
      list = priceDec(listRatio);
      contracted = priceDec(times(listRatio, call!.discount));
      if (line.above !== undefined) {
        skuPriceId += `:above-${line.above}`;
        detail.x_InputTokensAbove = line.above;
      }
      if (line.window) {
        skuPriceId += `:utc-${line.window}`;
        detail.x_TimeOfDayUtc = line.window;
      }
    }
    const key = [skuPriceId, formatDec(list), formatDec(contracted)].join('\u0000');
    let sku = this.#skus.get(key);
    if (!sku) {
      const skuId = `${e.provider}/${call?.matchedModel ?? e.model}/${cls}`;
      sku = { key, cls, skuId, skuPriceId, details: JSON.stringify(detail), list, contracted };
      this.#skus.set(key, sku);
    }
    return sku;
  }

  #row(periods: ReturnType<typeof periodsOf>, g: ModelDay, tags: string, { sku, quantity, calls }: Unit): FocusRow {
    const p = provider(g.provider);
    const per = UNITS[sku.cls].per;
    const pricingQuantity: Dec = normalise({ coef: BigInt(quantity), scale: per === 1_000 ? 3 : 6 });
    const contractedCost = costOf(sku.contracted, pricingQuantity);
    return {
      BilledCost: contractedCost,
      BillingAccountId: this.account.id,
      BillingAccountName: this.account.name || null,
      BillingCurrency: 'USD',
      BillingPeriodEnd: periods.BillingPeriodEnd,
      BillingPeriodStart: periods.BillingPeriodStart,
      ChargeCategory: 'Usage',
      ChargeClass: null,
      ChargeDescription: `${METERS[sku.cls]} of ${g.model || 'an unnamed model'} on ${p.service}`,
      ChargeFrequency: 'Usage-Based',
      ChargePeriodEnd: periods.ChargePeriodEnd,
      ChargePeriodStart: periods.ChargePeriodStart,
      ConsumedQuantity: quantity.toString(),
      ConsumedUnit: consumedUnit(sku.cls),
      ContractedCost: contractedCost,
      ContractedUnitPrice: formatDec(sku.contracted),
      EffectiveCost: contractedCost,
      InvoiceIssuerName: p.name,
      ListCost: costOf(sku.list, pricingQuantity),
      ListUnitPrice: formatDec(sku.list),
      PricingCategory: 'Standard',
      PricingQuantity: formatDec(pricingQuantity),
      PricingUnit: pricingUnit(sku.cls),
      ProviderName: p.name,
      PublisherName: p.name,
      ResourceId: `${g.provider}/${g.model}`,
      ResourceName: g.model || null,
      ResourceType: 'Model',
      ServiceCategory: 'AI and Machine Learning',
      ServiceName: p.service,
      ServiceSubcategory: 'Generative AI',
      SkuId: sku.skuId,
      SkuMeter: METERS[sku.cls],
      SkuPriceDetails: sku.details,
      SkuPriceId: sku.skuPriceId,
      Tags: tags,
      x_Requests: String(calls),
    };
  }
}

const pricers = new Map<string, Pricer>();

/** The pricer that splits calls for exports: the daemon's prices (METER_PRICES_FILE and the
 *  price table in force), made once per prices file. */
export function exportPricer(env: Record<string, string | undefined> = process.env): Pricer {
  const file = env.METER_PRICES_FILE?.trim() ?? '';
  let p = pricers.get(file);
  if (!p) {
    p = Pricer.fromEnv(env);
    pricers.set(file, p);
  }
  return p;
}

const DATA_TYPES: Partial<Record<FocusColumn, string>> = {
  BillingPeriodEnd: 'DATETIME',
  BillingPeriodStart: 'DATETIME',
  ChargePeriodEnd: 'DATETIME',
  ChargePeriodStart: 'DATETIME',
  SkuPriceDetails: 'JSON',
  Tags: 'JSON',
};
const DECIMALS = /Cost$|UnitPrice$|Quantity$|^x_Requests$/;

/** The FOCUS metadata of an export (specification/metadata: DataGenerator, the schema with its
 *  FocusVersion, CreationDate and column definitions), written beside a file as
 *  `<file>.metadata.json`. The schema id is derived from the columns: it changes when they do. */
export function focusMetadata(created: Date): Record<string, unknown> {
  const columns = FOCUS_COLUMNS.map((c) => ({
    ColumnName: c,
    DataType: DATA_TYPES[c] ?? (DECIMALS.test(c) ? 'DECIMAL' : 'STRING'),
    ...(DATA_TYPES[c] || DECIMALS.test(c) ? {} : { StringEncoding: 'UTF-8' }),
  }));
  return {
    DataGenerator: 'meter',
    SchemaId: `meter-focus-${FOCUS_VERSION}-${createHash('sha256').update(FOCUS_COLUMNS.join(',')).digest('hex').slice(0, 16)}`,
    FocusVersion: FOCUS_VERSION,
    CreationDate: created.toISOString().replace(/\.\d{3}Z$/, 'Z'),
    ColumnDefinition: columns,
  };
}
