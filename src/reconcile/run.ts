/**
 * One reconciliation run: the provider's reports for [from, to), meter's figures for the same
 * days, the comparison, and the results stored in one transaction. Used by `meter reconcile`
 * and the daemon's daily job alike; store access goes through the named admin commands, so a
 * CLI on an embedded store held by a daemon works the same way. The admin key stays in this
 * process: it is sent to the provider and nowhere else.
 */
import { MeterError } from '../errors.js';
import type { AdminPort } from '../admin/client.js';
import type { Config } from '../config.js';
import { providers } from '../providers/index.js';
import { amountToUnits, formatUnits, Usd } from './amount.js';
import { fetchAnthropicReport } from './anthropic.js';
import { reconcile } from './compare.js';
import { webSearchCost } from './tool-fees.js';
import { Pricer } from '../pricing/pricer.js';
import type { AdminApi, RetryOptions } from './http.js';
import { fetchOpenAIReport } from './openai.js';
import type { ResultRow } from './store.js';
import type { DayResult, MeterDay, ReconcileProvider, Reconciliation } from './types.js';

export const ADMIN_KEY_VARIABLE: Record<ReconcileProvider, string> = {
  openai: 'METER_OPENAI_ADMIN_KEY',
  anthropic: 'METER_ANTHROPIC_ADMIN_KEY',
};

/** A day is compared for findings once it ended this long ago: provider reports lag. */
export const SETTLE_MS = 6 * 3_600_000;

/** Thrown for a run that cannot start (no admin key, an account without a mapping): exit 1. */
export class ReconcileError extends MeterError {
  override name = 'ReconcileError';
}

export interface RunOptions {
  provider: ReconcileProvider;
  /** The account to reconcile (its mapped projects, workspaces or keys); absent: the organisation. */
  account?: string;
  from: string;
  to: string;
  now?: Date;
  config: Pick<Config, 'upstreams' | 'adminKeys'>;
  retry?: Partial<RetryOptions>;
}

export function adminApi(
  provider: ReconcileProvider,
  config: RunOptions['config'],
  retry?: Partial<RetryOptions>,
): AdminApi {
  const variable = ADMIN_KEY_VARIABLE[provider];
  const key = config.adminKeys[provider]?.reveal();
  if (!key) throw new ReconcileError(`${variable} is not set: reconciling ${provider} needs an organisation admin key`);
  const baseUrl = config.upstreams[provider] ?? providers[provider].defaultBaseUrl;
  return provider === 'openai'
    ? {
        provider,
        baseUrl,
        key,
        keyVariable: variable,
        keyKind: 'an OpenAI admin key (sk-admin-…, made by an organisation owner)',
        headers: { authorization: `Bearer ${key}`, accept: 'application/json' },
        retry,
      }
    : {
        provider,
        baseUrl,
        key,
        keyVariable: variable,
        keyKind: 'an Anthropic Admin API key (sk-ant-admin…, made by an organisation admin)',
        headers: { 'x-api-key': key, 'anthropic-version': '2023-06-01', accept: 'application/json' },
        retry,
      };
}

const units = (text: string) => amountToUnits(text) ?? 0n;

/** The first day whose figures are not final yet (today, or yesterday within SETTLE_MS of midnight). */
export const firstIncompleteDay = (now: Date) => new Date(now.getTime() - SETTLE_MS).toISOString().slice(0, 10);

export async function runReconciliation(store: AdminPort, opts: RunOptions): Promise<Reconciliation> {
  const now = opts.now ?? new Date();
  const api = adminApi(opts.provider, opts.config, opts.retry);
  const mappings = await store.call('reconcile.mappings', { provider: opts.provider });
  let account: { id: string; name: string } | undefined;
  if (opts.account !== undefined) {
    const m = mappings.find((x) => x.account === opts.account);
    if (!m)
      throw new ReconcileError(
        `--account "${opts.account}" has no ${opts.provider} mapping: tie its ${opts.provider === 'openai' ? 'project' : 'workspace'} or API key to it with \`meter reconcile map\``,
      );
    account = { id: m.account_id, name: m.account };
  }
  const scope = account?.id ?? '';
  const startedAt = now.toISOString();
  try {
    const report =
      opts.provider === 'openai'
        ? await fetchOpenAIReport(api, opts.from, opts.to, { costByApiKey: mappings.some((m) => m.kind === 'api_key') })
        : await fetchAnthropicReport(api, opts.from, opts.to);
    // Prices meter's web searches as the daemon did (the price table and METER_PRICES_FILE).
    const pricer = Pricer.fromEnv();
    const meterRows = await store.call('reconcile.meter', {
      provider: opts.provider,
      from: opts.from,
      to: opts.to,
      accountId: account?.id,
    });
    const meter: MeterDay[] = meterRows.map((r) => {
      const by_source = Object.fromEntries(
        r.sources.map((s) => [s.source, { calls: BigInt(s.calls), cost: units(s.cost) }]),
      );
      const none = by_source.none?.calls ?? 0n;
      const raw = r.sources.length > 0;
      const count = (text: string) => (/^\d+$/.test(text) ? BigInt(text) : 0n);
      const priority = raw ? r.sources.reduce((t, s) => t + units(s.priority_cost), 0n) : null;
      const searches = r.sources.reduce((t, s) => t + count(s.web_searches), 0n);
      const searchCost = raw ? webSearchCost(pricer, opts.provider, r.model, r.date, searches) : null;
      return {
        date: r.date,
        model: r.model,
        requests: BigInt(r.requests) - none,
        input_tokens: BigInt(r.input_tokens),
        cached_input_tokens: BigInt(r.cached_input_tokens),
        output_tokens: BigInt(r.output_tokens),
        cost: units(r.cost),
        by_source,
        priority_cost: priority,
        web_search_cost: searchCost,
      };
    });
    const result = reconcile({
      report,
      meter,
      mappings,
      account,
      from: opts.from,
      to: opts.to,
      firstIncompleteDay: firstIncompleteDay(now),
    });
    await store.call('reconcile.save', {
      provider: opts.provider,
      scope,
      from: opts.from,
      to: opts.to,
      startedAt,
      rows: result.days.map(toResultRow),
    });
    return result;
  } catch (err) {
    // Every failure once the run began (the provider's, a figure out of bounds, the store's) is
    // on record, best effort; nothing from this run is stored as complete.
    await store
      .call('reconcile.failed', {
        provider: opts.provider,
        scope,
        from: opts.from,
        to: opts.to,
        startedAt,
        error: (err as Error).message,
      })
      .catch(() => {});
    throw err;
  }
}

const text = (n: bigint | null) => (n === null ? null : n.toString());

/** bigints and money as JSON numbers: findings are stored as jsonb (informational; the figures have columns). */
export function plain(value: unknown): unknown {
  if (typeof value === 'bigint') return Number(value);
  if (value instanceof Usd) return Number(formatUnits(value.units));
  if (Array.isArray(value)) return value.map(plain);
  if (value !== null && typeof value === 'object')
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, plain(v)]));
  return value;
}

export function toResultRow(d: DayResult): ResultRow {
  return {
    date: d.date,
    model: d.model,
    provider_requests: text(d.provider.requests),
    provider_input_tokens: d.provider.input_tokens.toString(),
    provider_cached_input_tokens: d.provider.cached_input_tokens.toString(),
    provider_output_tokens: d.provider.output_tokens.toString(),
    provider_cost: d.provider.cost === null ? null : formatUnits(d.provider.cost),
    meter_requests: d.meter.requests!.toString(),
    meter_input_tokens: d.meter.input_tokens.toString(),
    meter_cached_input_tokens: d.meter.cached_input_tokens.toString(),
    meter_output_tokens: d.meter.output_tokens.toString(),
    meter_cost: formatUnits(d.meter.cost!),
    findings: plain(d.findings) as unknown[],
  };
}
