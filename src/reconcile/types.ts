/** Reconciliation's shared shapes (CONTRACT §7). Money is bigint units of 1e-8 USD throughout. */

export const RECONCILABLE = ['openai', 'anthropic'] as const;
export type ReconcileProvider = (typeof RECONCILABLE)[number];

/** The provider-side ids a usage or cost row can carry, and a mapping can name. */
export type MappingKind = 'project' | 'workspace' | 'api_key';

export interface Mapping {
  provider: ReconcileProvider;
  kind: MappingKind;
  external_id: string;
  account_id: string;
  account: string;
}

/** Which ids a provider row belongs to (null: not grouped by it, or the default workspace). */
export interface Groups {
  project?: string | null;
  workspace?: string | null;
  api_key?: string | null;
}

/** One usage row of a provider report, normalised: input counts ALL input tokens. */
export interface ProviderUsage {
  date: string;
  model: string;
  /** null: the provider does not count requests (Anthropic's report has no such field). */
  requests: bigint | null;
  input_tokens: bigint;
  cached_input_tokens: bigint;
  output_tokens: bigint;
  groups: Groups;
  service_tier: string | null;
  batch: boolean | null;
}

/** One cost row: model null when the row is not a token charge of a model (tools, storage). */
export interface ProviderCost {
  date: string;
  model: string | null;
  /** input, cached input, output, … as the provider names it; null when ungrouped. */
  item: string | null;
  /** A server tool's own fee (Anthropic cost_type `web_search`, `code_execution`): no model's tokens. */
  tool?: string;
  description: string;
  amount: bigint;
  groups: Groups;
}

export interface ProviderReport {
  provider: ReconcileProvider;
  usage: ProviderUsage[];
  costs: ProviderCost[];
  /** Whether the cost report can say what each mapped id cost (Anthropic: not per API key). */
  costGroupable: MappingKind[];
  /** Service tiers whose usage the usage report counts but the cost report leaves out
   *  (Anthropic: `priority`, billed through its commitment). */
  costExcludesTiers?: string[];
}

/** Meter's side of one day and model (calls with usage; provider errors are counted apart). */
export interface MeterDay {
  date: string;
  model: string;
  requests: bigint;
  input_tokens: bigint;
  cached_input_tokens: bigint;
  output_tokens: bigint;
  cost: bigint;
  /** Calls by usage_source (provider, estimated, none) with their cost, from the raw events. */
  by_source: Record<string, { calls: bigint; cost: bigint }>;
  /** From the raw events (null once they are past retention): the cost of Priority Tier calls,
   *  and of the web searches of the other calls (both within `cost`). */
  priority_cost?: bigint | null;
  web_search_cost?: bigint | null;
}

export interface Figures {
  requests: bigint | null;
  input_tokens: bigint;
  cached_input_tokens: bigint;
  output_tokens: bigint;
  cost: bigint | null;
}

export type FindingKind = 'bypass' | 'price_drift' | 'meter_only';

export interface Finding {
  kind: FindingKind;
  date: string;
  model: string;
  detail: string;
  [extra: string]: unknown;
}

export interface DayResult {
  date: string;
  model: string;
  provider: Figures;
  meter: Figures;
  /** meter − provider, units; null when the provider's cost is unknown. */
  diff_usd: bigint | null;
  /** 2-decimal text, null when the provider's figure is 0 or unknown. */
  diff_pct: string | null;
  findings: Finding[];
}

export interface Tolerance {
  /** Units of 1e-8 USD a day and model may differ by, whatever its size. */
  usd: bigint;
  /** Percent (of the provider's figure) a day and model may differ by. */
  pct: number;
}

export interface Reconciliation {
  provider: ReconcileProvider;
  /** null: the organisation; else the account's name. */
  account: string | null;
  from: string;
  to: string;
  tolerance: Tolerance;
  days: DayResult[];
  totals: { provider_cost: bigint | null; meter_cost: bigint; diff_usd: bigint | null; diff_pct: string | null };
  findings: Finding[];
  /** Provider charges no model's tokens explain (tools, storage, fine-tuning): not compared. */
  unattributed: { date: string; description: string; cost: bigint }[];
  /** Meter's cost of what the provider's cost report leaves out (Anthropic's Priority Tier):
   *  taken out of the days' meter cost, so like is compared with like. */
  meter_left_out: { date: string; model: string; description: string; cost: bigint }[];
}
