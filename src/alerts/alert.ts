import { raw, rawOrNull, stringifyJson } from '../money.js';

export const CHANNEL_KINDS = ['slack', 'teams', 'email', 'webhook'] as const;
export type ChannelKind = (typeof CHANNEL_KINDS)[number];

/** A channel as the senders need it (the secret included: never print or log this object). */
export interface AlertChannel {
  id: string;
  kind: ChannelKind;
  target: string;
  secret: string | null;
}

export interface TopModel {
  provider: string;
  model: string;
  spend: string;
  requests: string;
}
export interface TopTag {
  key: string;
  value: string;
  spend: string;
  requests: string;
}

/** What a `reconciliation.drift` alert adds (src/reconcile/alert.ts): the month's figures. */
export interface DriftFacts {
  provider: string;
  /** The organisation (every account's calls), or the account's mapped projects and keys. */
  scope: 'organisation' | 'account';
  from: string;
  to: string;
  provider_cost: string;
  meter_cost: string;
  diff_usd: string;
  diff_pct: string;
  threshold_pct: string;
}

/** Which budget a `budget.threshold` alert is about (CONTRACT §6): every budget's alert names it. */
export interface BudgetRef {
  budget_id: string;
  scope: { kind: string; key: string | null; value: string | null };
  window: string;
  timezone: string;
  /** ISO 8601 with the zone's offset. */
  window_start: string;
  window_end: string;
}

/** One alert as stored in the outbox payload. Money and counters stay decimal strings so the
 *  webhook body carries them exactly; the same stored alert yields the same body on every retry. */
export interface BudgetAlert {
  id: string;
  /** `budget.test` only for `meter alerts test`; `reconciliation.drift`: CONTRACT §7. */
  type: 'budget.threshold' | 'budget.test' | 'reconciliation.drift';
  account: string;
  month: string;
  /** 50, 80 or 100; null in a test message. */
  level: number | null;
  spend: string;
  /** null in a test message for an account without a budget. */
  budget: string | null;
  utilization_pct: string | null;
  top_models: TopModel[];
  top_tags: TopTag[];
  created_at: string;
  reconciliation?: DriftFacts;
  /** Absent in alerts queued by an older version and in test messages. */
  budget_ref?: BudgetRef;
}

/** The webhook body of CONTRACT §6, keys in the contract's order, money as exact JSON numbers. */
export function webhookBody(a: BudgetAlert): string {
  return stringifyJson({
    id: a.id,
    type: a.type,
    account: a.account,
    month: a.month,
    level: a.level,
    spend: raw(a.spend),
    budget: rawOrNull(a.budget),
    utilization_pct: rawOrNull(a.utilization_pct),
    top_models: a.top_models.map((m) => ({
      provider: m.provider,
      model: m.model,
      spend: raw(m.spend),
      requests: raw(m.requests),
    })),
    top_tags: a.top_tags.map((t) => ({ key: t.key, value: t.value, spend: raw(t.spend), requests: raw(t.requests) })),
    created_at: a.created_at,
    ...(a.budget_ref && {
      budget_id: a.budget_ref.budget_id,
      scope: a.budget_ref.scope,
      window: a.budget_ref.window,
      timezone: a.budget_ref.timezone,
      window_start: a.budget_ref.window_start,
      window_end: a.budget_ref.window_end,
    }),
    reconciliation: a.reconciliation && {
      ...a.reconciliation,
      provider_cost: raw(a.reconciliation.provider_cost),
      meter_cost: raw(a.reconciliation.meter_cost),
      diff_usd: raw(a.reconciliation.diff_usd),
      diff_pct: raw(a.reconciliation.diff_pct),
      threshold_pct: raw(a.reconciliation.threshold_pct),
    },
  });
}

/** One line that says what happened, for chat messages and e-mail subjects. */
export function alertHeadline(a: BudgetAlert): string {
  if (a.type === 'budget.test') return `Test message from meter for account ${a.account}`;
  if (a.reconciliation)
    return `Reconciliation drift: meter's ${a.month} ${a.reconciliation.provider} figures are ${a.reconciliation.diff_pct}% off the provider's own report`;
  const b = a.budget_ref;
  if (b && b.scope.kind !== 'account')
    return `Budget alert: ${a.account} has reached ${a.level}% of budget ${b.budget_id} (${scopeLabel(b)}, ${b.window} in ${b.timezone})`;
  if (b && b.window !== 'month')
    return `Budget alert: ${a.account} has reached ${a.level}% of budget ${b.budget_id} (${b.window} in ${b.timezone})`;
  return `Budget alert: ${a.account} has reached ${a.level}% of its ${a.month} budget`;
}

/** Label/value pairs shown by the human-facing channels. */
export function alertFacts(a: BudgetAlert): [string, string][] {
  const r = a.reconciliation;
  if (r)
    return [
      ['Account', a.account],
      ['Scope', r.scope === 'organisation' ? `the ${r.provider} organisation (all accounts)` : 'this account'],
      ['Days', `${r.from} to ${r.to} (UTC, end exclusive)`],
      ['Provider cost', `$${r.provider_cost}`],
      ['Meter cost', `$${r.meter_cost}`],
      ['Difference', `$${r.diff_usd} (${r.diff_pct}%, alert above ${r.threshold_pct}%)`],
    ];
  const b = a.budget_ref;
  const facts: [string, string][] = [['Account', a.account]];
  if (b) {
    facts.push(['Budget', `${b.budget_id} (${scopeLabel(b)})`]);
    facts.push(['Window', `${b.window} in ${b.timezone}: ${b.window_start} to ${b.window_end}`]);
  } else facts.push(['Month', a.month]);
  if (a.level !== null) facts.push(['Level', `${a.level}%`]);
  facts.push(['Spend', `$${a.spend}`]);
  facts.push([b ? 'Amount' : 'Budget', a.budget === null ? 'none set' : `$${a.budget}`]);
  if (a.utilization_pct !== null) facts.push(['Utilisation', `${a.utilization_pct}%`]);
  return facts;
}

/** "openai/gpt-4o: $12.5 (340 requests)" lines for the top models, then the top tags. */
export function alertTopLines(a: BudgetAlert): { models: string[]; tags: string[] } {
  const requests = (n: string) => `${n} request${n === '1' ? '' : 's'}`;
  return {
    models: a.top_models.map((m) => `${m.provider}/${m.model}: $${m.spend} (${requests(m.requests)})`),
    tags: a.top_tags.map((t) => `${t.key}=${t.value}: $${t.spend} (${requests(t.requests)})`),
  };
}

/** `account`, `tag team=search`, `model gpt-4o`. */
function scopeLabel(b: BudgetRef): string {
  if (b.scope.kind === 'account') return 'account';
  return b.scope.kind === 'tag' ? `tag ${b.scope.key}=${b.scope.value}` : `${b.scope.kind} ${b.scope.value}`;
}
