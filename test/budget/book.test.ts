/** BudgetBook: which budgets a call is subject to, answered from memory. */
import { describe, expect, it } from 'vitest';
import { BudgetBook } from '../../src/budget/book.js';
import type { BudgetDef } from '../../src/budget/definitions.js';
import { modelMatches, parseScope } from '../../src/budget/scope.js';

const def = (id: string, scope: string, over: Partial<BudgetDef> = {}): BudgetDef => ({
  id,
  accountId: 'a1',
  account: 'acme',
  scope: parseScope(scope),
  window: 'day',
  timezone: 'Asia/Kolkata',
  amount: '10',
  amountUnits: 1_000_000_000n,
  levels: [50, 80, 100],
  action: 'alert',
  strict: false,
  enforced: true,
  accountBudget: false,
  ...over,
});

const call = {
  accountId: 'a1',
  keyId: 'aaaaaaaaaaaa',
  tags: { tenant: 'globex', team: 'search' },
  provider: 'openai',
  model: 'gpt-4o-mini',
};

describe('BudgetBook', () => {
  const book = new BudgetBook([
    def('monthly', 'account', { accountBudget: true, window: 'month', timezone: 'UTC' }),
    def('tag', 'tag:tenant=globex', { action: 'block' }),
    def('othertag', 'tag:tenant=initech'),
    def('key', 'key:aaaaaaaaaaaa'),
    def('model', 'model:gpt-4o-mini', { action: 'shadow' }),
    def('model4o', 'model:gpt-4o'),
    def('provider', 'provider:anthropic'),
    def('downgraded', 'tag:team=search', { action: 'block', enforced: false }),
    def('elsewhere', 'account', { accountId: 'a2' }),
  ]);
  const now = Date.parse('2026-03-31T18:29:59Z'); // 23:59:59 on 31 March in Kolkata

  it('gives every budget whose scope matches, with its window in its zone', () => {
    const matched = book.matching(call, now);
    expect(matched.map((m) => m.id)).toEqual(['monthly', 'tag', 'key', 'model', 'downgraded']);
    const tag = matched.find((m) => m.id === 'tag')!;
    expect([new Date(tag.windowStart).toISOString(), new Date(tag.windowEnd).toISOString()]).toEqual([
      '2026-03-30T18:30:00.000Z',
      '2026-03-31T18:30:00.000Z',
    ]);
    expect(tag).toMatchObject({ action: 'block', amountUnits: 1_000_000_000n, timezone: 'Asia/Kolkata' });
    // A block budget on a plan without the hard cap only alerts.
    expect(matched.find((m) => m.id === 'downgraded')!.action).toBe('alert');
    // A second later it is April in Kolkata: the next window.
    expect(book.matching(call, now + 1000).find((m) => m.id === 'tag')!.windowStart).toBe(
      Date.parse('2026-03-31T18:30:00Z'),
    );
    expect(book.matching({ ...call, accountId: 'zz' }, now)).toEqual([]);
  });

  it('knows which accounts need admission by their budgets', () => {
    expect(book.admits('a1')).toBe(true);
    expect(book.admits('a2')).toBe(false);
    expect(new BudgetBook([def('x', 'account', { action: 'block', enforced: false })]).admits('a1')).toBe(false);
  });

  it('a model scope covers dated snapshots only', () => {
    expect(modelMatches('gpt-4o-mini', 'gpt-4o-mini-2024-07-18')).toBe(true);
    expect(modelMatches('claude-sonnet-4-5', 'claude-sonnet-4-5-20250929')).toBe(true);
    expect(modelMatches('gpt-4', 'gpt-4-0613')).toBe(true);
    expect(modelMatches('gpt-4o', 'gpt-4o-mini')).toBe(false);
    expect(modelMatches('grok-3-mini', 'grok-3-mini-high')).toBe(false);
    expect(modelMatches('gpt-4o', null)).toBe(false);
  });

  it('spendQuery gives one statement for the lease to run', () => {
    const q = book.spendQuery(
      { accountId: 'a1', scope: parseScope('tag:tenant=globex') },
      { start: 0, end: 86_400_000 },
    );
    expect(q.sql).toContain('usage_tag_quarter_hour');
    expect(q.params).toContain('globex');
  });
});
