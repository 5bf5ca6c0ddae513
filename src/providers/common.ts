import { TextCollector } from './scan.js';
import type { ExtraUnit, RequestInfo, StreamAccumulator, UnitCounts, Usage, UsageResult } from './types.js';

export type Obj = Record<string, unknown>;

export function obj(x: unknown): Obj | undefined {
  return typeof x === 'object' && x !== null && !Array.isArray(x) ? (x as Obj) : undefined;
}

/** The largest count one call can report in one field: a billion, 500 times the largest context
 *  window. Anything above is a provider's (or a hostile upstream's) nonsense: it is clamped
 *  here, so no count reaches pricing or SQL unbounded, and the event records the raw figures
 *  (src/metering/bounded-usage.ts). */
export const MAX_COUNT = 1_000_000_000;

/** A count: a finite non-negative number, else 0 (providers send null for "none"), at most MAX_COUNT. */
export function num(x: unknown): number {
  return typeof x === 'number' && Number.isFinite(x) && x > 0 ? Math.min(Math.trunc(x), MAX_COUNT) : 0;
}

export function isNum(x: unknown): x is number {
  return typeof x === 'number' && Number.isFinite(x);
}

export function str(x: unknown): string | undefined {
  return typeof x === 'string' && x !== '' ? x : undefined;
}

export function usage(p: Partial<Usage>): Usage {
  const u: Usage = {
    inputTokens: p.inputTokens ?? 0,
    outputTokens: p.outputTokens ?? 0,
    cachedInputTokens: p.cachedInputTokens ?? 0,
    cacheWriteTokens: p.cacheWriteTokens ?? 0,
    cacheWrite1hTokens: p.cacheWrite1hTokens ?? 0,
    reasoningTokens: p.reasoningTokens ?? 0,
  };
  if (p.providerCostTicks !== undefined) u.providerCostTicks = p.providerCostTicks;
  if (p.units) {
    const units = nonZeroUnits(p.units);
    if (units) u.units = units;
  }
  if (p.serviceTier !== undefined) u.serviceTier = p.serviceTier;
  return u;
}

/** The counts that are whole and positive, or undefined when none is (results compare field by field). */
export function nonZeroUnits(units: UnitCounts): UnitCounts | undefined {
  let out: UnitCounts | undefined;
  for (const [k, v] of Object.entries(units) as [ExtraUnit, number | undefined][]) {
    const n = num(v);
    if (n > 0) (out ??= {})[k] = n;
  }
  return out;
}

/** A provider's service tier as stored: lower-case, without Google's `SERVICE_TIER_` prefix. */
export function serviceTier(x: unknown): string | undefined {
  const s = str(x)?.toLowerCase();
  if (!s || s.length > 32 || s === 'unspecified' || s === 'service_tier_unspecified') return undefined;
  return s.startsWith('service_tier_') ? s.slice('service_tier_'.length) : s;
}

const MAX_REASONS = 16;
/** A short text as a response names itself (an id, a finish reason), else undefined. */
const shortText = (x: unknown): string | undefined =>
  typeof x === 'string' && x !== '' && x.length <= 128 ? x : undefined;

/** Adds what a response says of itself (its id, its finish reasons), bounded in size. */
export function withResponse(r: UsageResult, id: unknown, reasons: readonly unknown[] = []): UsageResult {
  const rid = shortText(id);
  if (rid) r.responseId = rid;
  let finish: string[] | undefined;
  for (const reason of reasons) {
    const text = shortText(reason);
    if (text === undefined) continue;
    (finish ??= []).push(text);
    if (finish.length === MAX_REASONS) break;
  }
  if (finish) r.finishReasons = finish;
  return r;
}

/** A UsageResult holding only what was found (results are compared field by field). */
export function usageResult(
  model: string | undefined,
  found: Usage | undefined,
  error = false,
  incomplete = false,
): UsageResult {
  const r: UsageResult = {};
  if (model !== undefined) r.model = model;
  if (found) r.usage = found;
  if (error) r.error = true;
  if (incomplete) r.incomplete = true;
  return r;
}

/** `model` of a JSON request body (every provider but Gemini). */
export function bodyModel(req: RequestInfo): string | undefined {
  return str(obj(req.body)?.model);
}

/** A JSON error body as providers send them: `{error: …}`, `{type: "error"}`, `{object: "error"}`. */
export function isErrorBody(b: Obj): boolean {
  return (b.error !== undefined && b.error !== null) || b.type === 'error' || b.object === 'error';
}

/** JSON.parse that never throws (a malformed event must not break metering of the rest). */
export function parse(data: string): Obj | undefined {
  try {
    return obj(JSON.parse(data));
  } catch {
    return undefined;
  }
}

/** Does the request path (query and trailing slashes ignored) end with `tail`? */
export function pathEndsWith(req: RequestInfo, tail: string): boolean {
  let p = req.path;
  const q = p.indexOf('?');
  if (q >= 0) p = p.slice(0, q);
  while (p.endsWith('/')) p = p.slice(0, -1);
  return p.endsWith(tail);
}

/** The part every stream accumulator shares: the generated text, kept for an estimate. */
export abstract class TextAccumulator implements StreamAccumulator {
  protected readonly text = new TextCollector();

  abstract onEvent(data: string, event?: string): void;
  abstract result(): UsageResult;

  streamedText(): string {
    return this.text.text();
  }

  streamedChars(): number {
    return this.text.chars();
  }
}
