/**
 * Budget scopes, windows, levels and actions (CONTRACT §6): what a budget definition is, how
 * the CLI spells it (`tag:team=search`), and whether a call matches it. A leaf of src/budget.
 */
import { didYouMean } from '../config.js';
import { MeterError } from '../errors.js';
import { validTimeZone, type WindowKind } from '../calendar.js';
import { TAG_KEY_RE } from '../tags.js';

export const SCOPE_KINDS = ['account', 'key', 'tag', 'model', 'provider'] as const;
export type ScopeKind = (typeof SCOPE_KINDS)[number];
export const WINDOWS: readonly WindowKind[] = ['day', 'week', 'month', 'quarter'];
export const ACTIONS = ['alert', 'block', 'shadow'] as const;
export type BudgetAction = (typeof ACTIONS)[number];
export const DEFAULT_LEVELS = [50, 80, 100];

/** `key` is the tag key of a tag scope (null otherwise); `value` the key id, tag value, model or
 *  provider (null for the account). */
export interface Scope {
  kind: ScopeKind;
  key: string | null;
  value: string | null;
}

export const ACCOUNT_SCOPE: Scope = { kind: 'account', key: null, value: null };

/** A user error in a budget's definition; the message names the flag and what is allowed. */
export class BudgetSpecError extends MeterError {
  override name = 'BudgetSpecError';
  override readonly exitCode = 2;
}

/** `account`, `key:<key-id>`, `tag:<k>=<v>`, `model:<model>` or `provider:<slug>`. */
export function parseScope(text: string): Scope {
  const allowed = 'expected account, key:<key-id>, tag:<key>=<value>, model:<model> or provider:<slug>';
  if (text === 'account') return ACCOUNT_SCOPE;
  const colon = text.indexOf(':');
  const kind = text.slice(0, colon);
  const rest = text.slice(colon + 1);
  if (colon < 0 || !rest) throw new BudgetSpecError(`--scope "${text}" is invalid: ${allowed}`);
  if (kind === 'tag') {
    const eq = rest.indexOf('=');
    const key = rest.slice(0, eq);
    const value = rest.slice(eq + 1);
    if (eq < 0 || !TAG_KEY_RE.test(key) || value.length < 1 || value.length > 256) {
      throw new BudgetSpecError(
        `--scope "${text}" is invalid: a tag scope is tag:<key>=<value>, the key 1-64 of [A-Za-z0-9_.-], the value 1-256 characters`,
      );
    }
    return { kind: 'tag', key, value };
  }
  if (kind !== 'key' && kind !== 'model' && kind !== 'provider') {
    throw new BudgetSpecError(`--scope "${text}" is invalid: ${allowed}`);
  }
  if (rest.length > 256) throw new BudgetSpecError(`--scope "${text}" is invalid: the value is over 256 characters`);
  if (kind === 'key' && !/^[0-9a-f]{12}$/.test(rest)) {
    throw new BudgetSpecError(`--scope "${text}" is invalid: a key id is the 12 hex digits \`meter keys list\` shows`);
  }
  return { kind, key: null, value: rest };
}

/** The CLI's spelling of a scope. */
export function scopeText(s: Scope): string {
  if (s.kind === 'account') return 'account';
  if (s.kind === 'tag') return `tag:${s.key}=${s.value}`;
  return `${s.kind}:${s.value}`;
}

export function parseWindow(text: string): WindowKind {
  if (!(WINDOWS as readonly string[]).includes(text)) {
    throw new BudgetSpecError(`--window "${text}" is invalid: expected day, week, month or quarter`);
  }
  return text as WindowKind;
}

/** Current IANA names that ICU lists under their older names (it accepts both): offered first. */
const CURRENT_ZONE_NAMES = ['UTC', 'Asia/Kolkata', 'Europe/Kyiv', 'Asia/Ho_Chi_Minh', 'Asia/Kathmandu', 'Asia/Yangon'];

export function parseTimeZone(text: string): string {
  const zone = validTimeZone(text);
  if (!zone) {
    const near = didYouMean(text, [...CURRENT_ZONE_NAMES, ...Intl.supportedValuesOf('timeZone')]);
    throw new BudgetSpecError(
      `--tz "${text}" is invalid: ${near ? `did you mean ${near}? ` : ''}expected an IANA time zone such as UTC, Europe/Berlin or Asia/Kolkata`,
    );
  }
  return zone;
}

/** 1 to 10 distinct whole percentages between 1 and 1000, in ascending order. */
export function parseLevels(text: string): number[] {
  const parts = text.split(',').map((p) => p.trim().replace(/%$/, ''));
  const levels = parts.map(Number);
  if (
    parts.length < 1 ||
    parts.length > 10 ||
    parts.some((p) => !/^\d{1,4}$/.test(p)) ||
    levels.some((l) => l < 1 || l > 1000) ||
    new Set(levels).size !== levels.length
  ) {
    throw new BudgetSpecError(
      `--levels "${text}" is invalid: expected 1 to 10 distinct whole percentages between 1 and 1000, e.g. 50,80,100`,
    );
  }
  return levels.sort((a, b) => a - b);
}

export function parseAction(text: string): BudgetAction {
  if (!(ACTIONS as readonly string[]).includes(text)) {
    throw new BudgetSpecError(`--action "${text}" is invalid: expected alert, block or shadow`);
  }
  return text as BudgetAction;
}

/** A dated snapshot's suffix: `-2024-07-18` (OpenAI), `-20241022` (Anthropic), `-0613`. */
const SNAPSHOT_RE = /^-(?:\d{4}-\d{2}-\d{2}|\d{8}|\d{4})$/;

/** A `model:<name>` scope matches `<name>` and its dated snapshots. */
export function modelMatches(scopeModel: string, model: string | null | undefined): boolean {
  if (!model) return false;
  if (model === scopeModel) return true;
  return model.startsWith(scopeModel) && SNAPSHOT_RE.test(model.slice(scopeModel.length));
}

/** What is known of a call when it is admitted. */
export interface BudgetCall {
  accountId: string;
  keyId: string;
  tags: Record<string, string>;
  provider: string;
  /** The requested model (from the body), when known. */
  model?: string | null;
}

/** Does the scope cover the call? (A model scope also matches on the reported model once the
 *  call has ended: the spend query does that.) */
export function scopeMatches(s: Scope, call: BudgetCall): boolean {
  switch (s.kind) {
    case 'account':
      return true;
    case 'key':
      return call.keyId === s.value;
    case 'tag':
      return call.tags[s.key!] === s.value;
    case 'provider':
      return call.provider === s.value;
    case 'model':
      return modelMatches(s.value!, call.model);
  }
}
