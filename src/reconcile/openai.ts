/**
 * OpenAI's organisation reports (Admin API; field names checked against the official spec,
 * openai/openai-openapi, and the openai SDK 6.x `admin.organization.usage`):
 * GET /organization/usage/completions and /organization/usage/embeddings (daily buckets of
 * input_tokens — cached and cache-write included — input_cached_tokens, output_tokens,
 * num_model_requests, grouped by model, project_id, api_key_id) and GET /organization/costs
 * (amount.value in amount.currency, by line_item and project_id).
 */
import { amount, bucketDay, count } from './figures.js';
import { getAllPages, ProviderApiError, type AdminApi } from './http.js';
import type { MappingKind, ProviderCost, ProviderReport, ProviderUsage } from './types.js';

interface Page<R> {
  data: { start_time: number; end_time: number; results: R[] }[];
  has_more: boolean;
  next_page: string | null;
}

interface UsageResult {
  input_tokens?: number;
  input_cached_tokens?: number;
  output_tokens?: number;
  num_model_requests?: number;
  model?: string | null;
  project_id?: string | null;
  api_key_id?: string | null;
  batch?: boolean | null;
  service_tier?: string | null;
}

interface CostResult {
  amount?: { value?: number | string; currency?: string };
  line_item?: string | null;
  project_id?: string | null;
  api_key_id?: string | null;
}

const unix = (date: string) => Date.parse(`${date}T00:00:00Z`) / 1000;

/** A line item of web-search tool calls (`web search tool calls`, `gpt-4o, web search`). */
const WEB_SEARCH_LINE = /web[ _-]?search/i;

/** `gpt-4o-2024-08-06, input` → model and item; a line item without a comma is its own name. */
export function splitLineItem(lineItem: string): { model: string; item: string | null } {
  const cut = lineItem.lastIndexOf(', ');
  return cut < 0 ? { model: lineItem, item: null } : { model: lineItem.slice(0, cut), item: lineItem.slice(cut + 2) };
}

export async function fetchOpenAIReport(
  api: AdminApi,
  from: string,
  to: string,
  opts: { costByApiKey: boolean },
): Promise<ProviderReport> {
  const range = { start_time: unix(from), end_time: unix(to), bucket_width: '1d' };
  const usage: ProviderUsage[] = [];
  for (const path of ['/organization/usage/completions', '/organization/usage/embeddings']) {
    const pages = await getAllPages<Page<UsageResult>>(api, path, {
      ...range,
      group_by: ['model', 'project_id', 'api_key_id'],
      limit: 31,
    });
    const where = `openai ${path}`;
    for (const page of pages)
      for (const bucket of page.data ?? [])
        for (const r of bucket.results ?? []) {
          usage.push({
            date: bucketDay(bucket.start_time * 1000, bucket.start_time, where, from, to),
            model: r.model ?? '(ungrouped)',
            requests: count(r.num_model_requests, where, 'num_model_requests'),
            input_tokens: count(r.input_tokens, where, 'input_tokens'),
            cached_input_tokens: count(r.input_cached_tokens, where, 'input_cached_tokens'),
            output_tokens: count(r.output_tokens, where, 'output_tokens'),
            groups: { project: r.project_id ?? null, api_key: r.api_key_id ?? null },
            service_tier: r.service_tier ?? null,
            batch: r.batch ?? null,
          });
        }
  }
  const costs: ProviderCost[] = [];
  const groupBy = ['line_item', 'project_id', ...(opts.costByApiKey ? ['api_key_id'] : [])];
  for (const page of await getAllPages<Page<CostResult>>(api, '/organization/costs', {
    ...range,
    group_by: groupBy,
    limit: 31,
  }))
    for (const bucket of page.data ?? [])
      for (const r of bucket.results ?? []) {
        const currency = (r.amount?.currency ?? 'usd').toLowerCase();
        if (currency !== 'usd')
          throw new ProviderApiError(`openai costs are in ${currency}: meter reconciles USD only`);
        const where = 'openai /organization/costs';
        const value = amount(r.amount?.value ?? 0, 0, where, 'amount.value');
        const { model, item } = r.line_item ? splitLineItem(r.line_item) : { model: null, item: null };
        const cost: ProviderCost = {
          date: bucketDay(bucket.start_time * 1000, bucket.start_time, where, from, to),
          model,
          item,
          description: r.line_item ?? 'all line items',
          amount: value,
          groups: { project: r.project_id ?? null, api_key: r.api_key_id ?? null },
        };
        // The spec gives no list of line items; a web search fee is recognised by its words.
        if (r.line_item && WEB_SEARCH_LINE.test(r.line_item)) {
          cost.model = null;
          cost.tool = 'web_search';
        }
        costs.push(cost);
      }
  const costGroupable: MappingKind[] = opts.costByApiKey ? ['project', 'api_key'] : ['project'];
  return { provider: 'openai', usage, costs, costGroupable };
}
