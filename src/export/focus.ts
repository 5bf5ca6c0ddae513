/**
 * FOCUS 1.2 (FinOps Open Cost and Usage Specification) rows: one per UTC day × provider ×
 * model × tag set. The columns are the specification's Mandatory ones, the Recommended and
 * Conditional ones that apply to metered LLM usage, and meter's own `x_` columns (the spec's
 * prefix for custom columns). docs/export.md lists them with their meaning.
 */
import type { ProviderSlug } from '../providers/types.js';
import { nextDay } from './params.js';
import type { GroupRow } from './rows.js';

export const FOCUS_VERSION = '1.2';

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
  'EffectiveCost',
  'InvoiceIssuerName',
  'ListCost',
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
  'Tags',
  'x_Requests',
  'x_InputTokens',
  'x_CachedInputTokens',
  'x_OutputTokens',
] as const;

export type FocusColumn = (typeof FOCUS_COLUMNS)[number];

/** Who bills the usage, and the service's name, per provider slug. */
const PROVIDERS: Record<ProviderSlug, { name: string; service: string }> = {
  openai: { name: 'OpenAI', service: 'OpenAI API' },
  anthropic: { name: 'Anthropic', service: 'Claude API' },
  groq: { name: 'Groq', service: 'GroqCloud API' },
  gemini: { name: 'Google', service: 'Gemini API' },
  mistral: { name: 'Mistral AI', service: 'Mistral AI API' },
  together: { name: 'Together AI', service: 'Together AI API' },
  cohere: { name: 'Cohere', service: 'Cohere API' },
  deepseek: { name: 'DeepSeek', service: 'DeepSeek API' },
  xai: { name: 'xAI', service: 'xAI API' },
};

function provider(slug: string): { name: string; service: string } {
  return PROVIDERS[slug as ProviderSlug] ?? { name: slug, service: `${slug} API` };
}

const at = (day: string) => `${day}T00:00:00Z`;

function billingPeriod(day: string): [string, string] {
  const start = `${day.slice(0, 7)}-01`;
  const d = new Date(`${start}T00:00:00Z`);
  const end = new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1)).toISOString().slice(0, 10);
  return [at(start), at(end)];
}

/** Adds decimal integer strings exactly. */
const addIntegers = (a: string, b: string) => (BigInt(a) + BigInt(b)).toString();

/** One FOCUS row; null is an empty cell (CSV). `tags` is already filtered to string pairs. */
export function focusRow(
  r: GroupRow,
  account: { id: string; name: string },
  tags: Record<string, string>,
): Record<FocusColumn, string | null> {
  const day = r.day!;
  const [periodStart, periodEnd] = billingPeriod(day);
  const p = provider(r.provider!);
  const tokens = addIntegers(r.input_tokens, r.output_tokens);
  return {
    BilledCost: r.cost,
    BillingAccountId: account.id,
    BillingAccountName: account.name,
    BillingCurrency: 'USD',
    BillingPeriodEnd: periodEnd,
    BillingPeriodStart: periodStart,
    ChargeCategory: 'Usage',
    ChargeClass: null,
    ChargeDescription: `${r.model} tokens on ${p.service}`,
    ChargeFrequency: 'Usage-Based',
    ChargePeriodEnd: at(nextDay(day)),
    ChargePeriodStart: at(day),
    ConsumedQuantity: tokens,
    ConsumedUnit: 'Tokens',
    ContractedCost: r.cost,
    EffectiveCost: r.cost,
    InvoiceIssuerName: p.name,
    ListCost: r.cost,
    PricingCategory: 'Standard',
    PricingQuantity: tokens,
    PricingUnit: 'Tokens',
    ProviderName: p.name,
    PublisherName: p.name,
    ResourceId: r.model!,
    ResourceName: r.model!,
    ResourceType: 'Model',
    ServiceCategory: 'AI and Machine Learning',
    ServiceName: p.service,
    ServiceSubcategory: 'Generative AI',
    Tags: JSON.stringify(tags),
    x_Requests: r.requests,
    x_InputTokens: r.input_tokens,
    x_CachedInputTokens: r.cached_input_tokens,
    x_OutputTokens: r.output_tokens,
  };
}
