import { MAX_COUNT } from '../providers/common.js';
import type { ExtraUnit, Usage } from '../providers/types.js';

/** provider_cost_ticks is a bigint column. */
const MAX_TICKS = 2n ** 63n - 1n;
const COUNTS = [
  'inputTokens',
  'outputTokens',
  'cachedInputTokens',
  'cacheWriteTokens',
  'cacheWrite1hTokens',
  'reasoningTokens',
] as const;
/** At most this many raw figures are kept per event. */
const MAX_RAW = 16;

/** What an event keeps of usage that was out of bounds (usage_events.usage_raw). */
export interface RawUsage {
  /** The fields that were clamped. */
  clamped: string[];
  /** Out-of-range numbers of the response body by JSON path, as the provider sent them (to
   *  double precision); absent for a stream. */
  figures?: Record<string, string>;
}

/**
 * The last guard before pricing and SQL: every count at most MAX_COUNT (sums of clamped
 * fields included) and xAI's cost ticks within a bigint. Usage within bounds is returned as it
 * is (no copy); otherwise a clamped copy and what was clamped, with the body's raw figures.
 */
export function boundUsage(usage: Usage, body: unknown): { usage: Usage; raw: RawUsage | null } {
  if (withinBounds(usage)) return { usage, raw: null };
  let out: Usage | undefined;
  const clamped: string[] = [];
  for (const k of COUNTS) {
    if (usage[k] >= MAX_COUNT) {
      (out ??= { ...usage })[k] = MAX_COUNT;
      clamped.push(k);
    }
  }
  for (const [k, v] of Object.entries(usage.units ?? {})) {
    if ((v ?? 0) >= MAX_COUNT) {
      out ??= { ...usage };
      out.units = { ...out.units, [k]: MAX_COUNT };
      clamped.push(`units.${k}`);
    }
  }
  if (usage.providerCostTicks !== undefined && usage.providerCostTicks > MAX_TICKS) {
    out ??= { ...usage };
    delete out.providerCostTicks;
    clamped.push('providerCostTicks');
  }
  if (!out) return { usage, raw: null };
  const figures = hugeNumbers(body);
  return { usage: out, raw: figures ? { clamped, figures } : { clamped } };
}

/** Every call's check, allocating nothing: most usage is within bounds. */
function withinBounds(usage: Usage): boolean {
  for (const k of COUNTS) if (usage[k] >= MAX_COUNT) return false;
  if (usage.units) for (const k in usage.units) if ((usage.units[k as ExtraUnit] ?? 0) >= MAX_COUNT) return false;
  return usage.providerCostTicks === undefined || usage.providerCostTicks <= MAX_TICKS;
}

/** Numbers of a parsed JSON body at or above MAX_COUNT (or not finite), by path. */
function hugeNumbers(body: unknown): Record<string, string> | undefined {
  let found: Record<string, string> | undefined;
  let n = 0;
  const walk = (v: unknown, path: string, depth: number) => {
    if (n >= MAX_RAW || depth > 8) return;
    if (typeof v === 'number' && !(Math.abs(v) < MAX_COUNT)) {
      (found ??= {})[path || '$'] = String(v);
      n++;
    } else if (typeof v === 'string' && /^\d{19,}$/.test(v)) {
      (found ??= {})[path || '$'] = v.slice(0, 64);
      n++;
    } else if (typeof v === 'object' && v !== null) {
      for (const [k, x] of Object.entries(v)) walk(x, path ? `${path}.${k}` : k, depth + 1);
    }
  };
  walk(body, '', 0);
  return found;
}
