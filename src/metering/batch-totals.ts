/**
 * Batch results downloaded through the proxy (README "Batch results"). Every succeeded line is
 * priced on its own at the batch tier (a long-context threshold applies per request, never to a
 * file's sum) and added to its model's total as an exact fraction; nothing of the body is kept.
 * A whole 2xx download then becomes one usage event per model, rounded once, each carrying a
 * claim key: the store inserts an event's charge only for the first claim of that key per
 * account (src/store/event-batch.ts), so downloading the same results again, from this sidecar
 * or another, charges nothing more.
 */
import { createHash } from 'node:crypto';
import { COST_DECIMALS, type Pricer } from '../pricing/index.js';
import { divRoundHalfEven, formatFixed, type Ratio } from '../pricing/decimal.js';
import { usage } from '../providers/common.js';
import type { BatchResults, ProviderSlug, Usage } from '../providers/types.js';
import type { UsageEvent } from './event.js';
import { storedUnits } from '../store/event-units.js';
import { uuidv7 } from './ids.js';
import { storable } from './storable.js';

/** Distinct models summed per download (a real file holds a handful): memory stays bounded. */
export const MAX_BATCH_MODELS = 256;
/** A result line holds a whole answer (long text, an image): lines up to this size are read. */
export const BATCH_LINE_BYTES = 16 << 20;
/** Longest claim key stored as it is; a longer one is hashed. */
const MAX_CLAIM_CHARS = 200;

interface ModelTotal {
  usage: Usage;
  /** Sum of the lines' costs in 1e-8 USD, unrounded; undefined once a line had no price. */
  exact: Ratio | undefined;
}

const zeroBatchUsage = (): Usage => usage({ serviceTier: 'batch' });

export class BatchTotals {
  private readonly byModel = new Map<string, ModelTotal>();

  constructor(
    private readonly results: BatchResults,
    private readonly provider: ProviderSlug,
    private readonly pricer: Pricer,
    /** When the download arrived: dated prices use it, as for any call. */
    private readonly time: Date,
  ) {}

  /** One NDJSON line of the file (the framer's sink). */
  onEvent(line: string): void {
    const found = this.results.readLine(line);
    if (!found) return;
    let total = this.byModel.get(found.model);
    if (!total) {
      if (this.byModel.size >= MAX_BATCH_MODELS) return;
      total = { usage: zeroBatchUsage(), exact: { num: 0n, den: 1n } };
      this.byModel.set(found.model, total);
    }
    const usage: Usage = { ...found.usage, serviceTier: 'batch' };
    addUsage(total.usage, usage);
    const exact = this.pricer.exactCost({ provider: this.provider, model: found.model, usage, time: this.time });
    total.exact = exact && total.exact && addRatio(total.exact, exact);
  }

  /** The download's events: one per model read, built on the call's own event (its id goes to
   *  the first, so X-Meter-Request-Id names one of them); the call's event alone when the file
   *  held no usage (an input file, only errored requests). */
  events(call: UsageEvent): UsageEvent[] {
    if (this.byModel.size === 0) return [call];
    const out: UsageEvent[] = [];
    for (const [name, total] of this.byModel) {
      const u = total.usage;
      const model = storable(name);
      out.push({
        ...call,
        id: out.length === 0 ? call.id : uuidv7(),
        model,
        requestedModel: model,
        inputTokens: u.inputTokens,
        outputTokens: u.outputTokens,
        cachedInputTokens: u.cachedInputTokens,
        cacheWriteTokens: u.cacheWriteTokens,
        reasoningTokens: u.reasoningTokens,
        cost: formatFixed(total.exact ? divRoundHalfEven(total.exact.num, total.exact.den) : 0n, COST_DECIMALS),
        unpriced: total.exact === undefined,
        usageSource: 'provider',
        providerCostTicks: u.providerCostTicks?.toString() ?? null,
        units: storedUnits(u),
        serviceTier: 'batch',
        claim: claimKey(this.provider, this.results.id, name),
      });
    }
    return out;
  }
}

/** `anthropic:<batch id>:<model>`, `openai:<file id>:<model>`; hashed past MAX_CLAIM_CHARS. */
export function claimKey(provider: ProviderSlug, id: string, model: string): string {
  const key = storable(`${provider}:${id}:${model}`);
  if (key.length <= MAX_CLAIM_CHARS) return key;
  return `${provider}:sha256:${createHash('sha256').update(`${id}\u0000${model}`).digest('hex')}`;
}

/** Adds every unit of `b` to `a` (in place). */
export function addUsage(a: Usage, b: Usage): void {
  a.inputTokens += b.inputTokens;
  a.outputTokens += b.outputTokens;
  a.cachedInputTokens += b.cachedInputTokens;
  a.cacheWriteTokens += b.cacheWriteTokens;
  a.cacheWrite1hTokens += b.cacheWrite1hTokens;
  a.reasoningTokens += b.reasoningTokens;
  if (b.providerCostTicks !== undefined) a.providerCostTicks = (a.providerCostTicks ?? 0n) + b.providerCostTicks;
  if (b.units) {
    const units = (a.units ??= {});
    for (const [k, v] of Object.entries(b.units) as [keyof typeof units, number][]) units[k] = (units[k] ?? 0) + v;
  }
}

/** a + b, exactly (the denominators are powers of ten times small tier and discount ratios). */
function addRatio(a: Ratio, b: Ratio): Ratio {
  if (a.den === b.den) return { num: a.num + b.num, den: a.den };
  const g = gcd(a.den, b.den);
  return { num: a.num * (b.den / g) + b.num * (a.den / g), den: (a.den / g) * b.den };
}

function gcd(a: bigint, b: bigint): bigint {
  while (b !== 0n) [a, b] = [b, a % b];
  return a;
}
