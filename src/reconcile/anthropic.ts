/**
 * Anthropic's organisation reports (Admin API, checked against its API reference,
 * platform.claude.com/docs/en/api/admin): GET /organizations/usage_report/messages (daily
 * buckets of uncached_input_tokens, cache_read_input_tokens, cache_creation
 * {ephemeral_1h_input_tokens, ephemeral_5m_input_tokens}, output_tokens, server_tool_use, by
 * model, api_key_id, workspace_id; no request count) and GET /organizations/cost_report
 * (amount: a decimal string in cents; with group_by description: model, token_type, cost_type).
 */
import { amount, bucketDay, count } from './figures.js';
import { getAllPages, ProviderApiError, type AdminApi } from './http.js';
import type { ProviderCost, ProviderReport, ProviderUsage } from './types.js';

interface Page<R> {
  data: { starting_at: string; ending_at: string; results: R[] }[];
  has_more: boolean;
  next_page: string | null;
}

interface UsageResult {
  uncached_input_tokens?: number;
  cache_read_input_tokens?: number;
  cache_creation?: { ephemeral_1h_input_tokens?: number; ephemeral_5m_input_tokens?: number } | null;
  output_tokens?: number;
  model?: string | null;
  api_key_id?: string | null;
  workspace_id?: string | null;
  service_tier?: string | null;
}

interface CostResult {
  amount?: string;
  currency?: string;
  description?: string | null;
  model?: string | null;
  token_type?: string | null;
  cost_type?: string | null;
  workspace_id?: string | null;
}

/** A bucket's `starting_at` (RFC 3339) as its UTC day, one of [from, to). */
const day = (at: unknown, where: string, from: string, to: string) =>
  bucketDay(typeof at === 'string' && at.length <= 40 ? Date.parse(at) : NaN, at, where, from, to);

/**
 * The cost report's `model` as the usage report names models. The API reference calls it "Model
 * name used" and gives no example; the usage report's are ids (`claude-sonnet-4-20250514`). An id
 * is kept; a display name (`Claude Sonnet 4`, `Claude 3.5 Haiku`) becomes the id's form without
 * a date (`claude-sonnet-4`, `claude-3-5-haiku`), which the comparison ties to the day's dated id.
 */
export function costModel(model: string | null | undefined): string | null {
  if (!model) return null;
  return /\s/.test(model.trim())
    ? model
        .trim()
        .toLowerCase()
        .replace(/[\s.]+/g, '-')
    : model;
}

export async function fetchAnthropicReport(api: AdminApi, from: string, to: string): Promise<ProviderReport> {
  const range = { starting_at: `${from}T00:00:00Z`, ending_at: `${to}T00:00:00Z`, bucket_width: '1d', limit: 31 };
  const usage: ProviderUsage[] = [];
  for (const page of await getAllPages<Page<UsageResult>>(api, '/organizations/usage_report/messages', {
    ...range,
    // By service tier too: Priority Tier usage is in this report but not in the cost report.
    group_by: ['model', 'api_key_id', 'workspace_id', 'service_tier'],
  }))
    for (const bucket of page.data ?? [])
      for (const r of bucket.results ?? []) {
        const where = 'anthropic /organizations/usage_report/messages';
        const n = (value: unknown, field: string) => count(value, where, field);
        const cached = n(r.cache_read_input_tokens, 'cache_read_input_tokens');
        const writes =
          n(r.cache_creation?.ephemeral_1h_input_tokens, 'cache_creation.ephemeral_1h_input_tokens') +
          n(r.cache_creation?.ephemeral_5m_input_tokens, 'cache_creation.ephemeral_5m_input_tokens');
        usage.push({
          date: day(bucket.starting_at, where, from, to),
          model: r.model ?? '(ungrouped)',
          requests: null,
          input_tokens: n(r.uncached_input_tokens, 'uncached_input_tokens') + cached + writes,
          cached_input_tokens: cached,
          output_tokens: n(r.output_tokens, 'output_tokens'),
          groups: { workspace: r.workspace_id ?? null, api_key: r.api_key_id ?? null },
          service_tier: r.service_tier ?? null,
          batch: r.service_tier ? r.service_tier === 'batch' : null,
        });
      }
  const costs: ProviderCost[] = [];
  for (const page of await getAllPages<Page<CostResult>>(api, '/organizations/cost_report', {
    ...range,
    group_by: ['workspace_id', 'description'],
  }))
    for (const bucket of page.data ?? [])
      for (const r of bucket.results ?? []) {
        const currency = (r.currency ?? 'USD').toUpperCase();
        if (currency !== 'USD')
          throw new ProviderApiError(`anthropic cost_report is in ${currency}: meter reconciles USD only`);
        const where = 'anthropic /organizations/cost_report';
        const cents = amount(r.amount ?? '0', 2, where, 'amount (cents)');
        const tokens = (r.cost_type ?? 'tokens') === 'tokens';
        const cost: ProviderCost = {
          date: day(bucket.starting_at, where, from, to),
          model: tokens ? costModel(r.model) : null,
          item: r.token_type ?? null,
          description: r.description ?? r.cost_type ?? 'all costs',
          amount: cents,
          groups: { workspace: r.workspace_id ?? null },
        };
        if (!tokens && r.cost_type) cost.tool = r.cost_type;
        costs.push(cost);
      }
  return { provider: 'anthropic', usage, costs, costGroupable: ['workspace'], costExcludesTiers: ['priority'] };
}
