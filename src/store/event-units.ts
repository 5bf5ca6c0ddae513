/**
 * An event's `units` column: the billed units beyond its token columns, under the names
 * @pydantic/genai-prices gives them (`cache_write_1h_tokens`, `input_audio_tokens`,
 * `web_searches`, …), only those that are non-zero; NULL when there are none. With the token
 * columns and `service_tier` it is everything a call's cost is computed from, so a call can be
 * priced again later (`meter pricing reprice`).
 */
import { EXTRA_UNITS, type ExtraUnit, type UnitCounts, type Usage } from '../providers/types.js';

export type StoredUnits = Partial<Record<ExtraUnit | 'cache_write_1h_tokens', number>>;

export function storedUnits(usage: Usage): StoredUnits | null {
  let out: StoredUnits | null = null;
  if (usage.cacheWrite1hTokens > 0) out = { cache_write_1h_tokens: usage.cacheWrite1hTokens };
  if (usage.units) {
    for (const k of EXTRA_UNITS) {
      const v = usage.units[k];
      if (v !== undefined && v > 0) (out ??= {})[k] = v;
    }
  }
  return out;
}

/** The stored columns of an event, as read back from the database (counts as text or numbers). */
export interface StoredUsage {
  input_tokens: string | number;
  output_tokens: string | number;
  cached_input_tokens: string | number;
  cache_write_tokens: string | number;
  reasoning_tokens: string | number;
  units: Record<string, unknown> | null;
  service_tier: string | null;
}

const count = (v: unknown): number => {
  const n = typeof v === 'string' ? Number(v) : v;
  return typeof n === 'number' && Number.isFinite(n) && n > 0 ? Math.trunc(n) : 0;
};

/** The Usage an event was priced from. */
export function usageFromStored(row: StoredUsage): Usage {
  const u: Usage = {
    inputTokens: count(row.input_tokens),
    outputTokens: count(row.output_tokens),
    cachedInputTokens: count(row.cached_input_tokens),
    cacheWriteTokens: count(row.cache_write_tokens),
    cacheWrite1hTokens: count(row.units?.cache_write_1h_tokens),
    reasoningTokens: count(row.reasoning_tokens),
  };
  let units: UnitCounts | undefined;
  for (const k of EXTRA_UNITS) {
    const v = count(row.units?.[k]);
    if (v > 0) (units ??= {})[k] = v;
  }
  if (units) u.units = units;
  if (row.service_tier) u.serviceTier = row.service_tier;
  return u;
}
