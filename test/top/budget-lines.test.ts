/** `meter top`'s budget bars: one per budget other than the account's monthly one, drawn from
 *  `meter budgets list`'s view, and the same figures in `--once --json`. */
import { describe, expect, it } from 'vitest';
import { deriveFigures, type Snapshot } from '../../cli/top/derive.js';
import { figuresJson } from '../../cli/top/json.js';
import { frameLines, lineText } from '../../cli/top/layout.js';
import type { BudgetView } from '../../src/top/budgets.js';

const NOW = Date.parse('2026-11-24T12:30:30Z');
const view = (over: Partial<BudgetView>): BudgetView => ({
  id: 'b00000000001',
  account: 'acme',
  scope: { kind: 'account', key: null, value: null },
  window: 'month',
  timezone: 'UTC',
  window_start: '2026-11-01T00:00:00+00:00',
  window_end: '2026-12-01T00:00:00+00:00',
  amount: '100',
  spend: '10',
  utilization_pct: '10',
  levels: [50, 80, 100],
  levels_fired: [],
  action: 'alert',
  strict: false,
  state: 'ok',
  shadow_refusals: 0,
  ...over,
});

const snapshot: Snapshot = {
  account: 'acme',
  plan: 'pro',
  accounts: ['acme'],
  nowMs: NOW,
  intervalS: 1,
  windowS: 60,
  month: { spend: '10', requests: '3', budget: '100', hard_cap: false, levels_fired: [] },
  byModel: [],
  tagKey: null,
  tagKeys: [],
  byTag: [],
  buckets: new Map(),
  events: [],
  tailSize: 10,
  budgets: [
    view({ id: '0123456789ab' }), // the account budget: scope account, window month, zone UTC
    view({
      id: 'b00000000002',
      scope: { kind: 'tag', key: 'tenant', value: 'globex' },
      window: 'day',
      timezone: 'Asia/Kolkata',
      amount: '5',
      spend: '5.5',
      utilization_pct: '110',
      action: 'block',
      state: 'blocked',
    }),
    view({
      id: 'b00000000003',
      scope: { kind: 'provider', key: null, value: 'anthropic' },
      amount: '2',
      spend: '2.00000001',
      utilization_pct: '100',
      action: 'shadow',
      state: 'would_block',
      shadow_refusals: 7,
    }),
  ],
};

describe('meter top budget bars', () => {
  it('draws a bar per budget besides the monthly one, with its scope, zone, action and state', () => {
    const text = frameLines(deriveFigures(snapshot), { width: 100, height: 30 }).map(lineText);
    const tag = text.find((l) => l.includes('tag:tenant=globex day Asia/Kolkata'));
    expect(tag).toContain('110% of $5.00 block: BLOCKED (402)');
    expect(tag).toContain('[████');
    const shadow = text.find((l) => l.includes('provider:anthropic month UTC'));
    expect(shadow).toContain('shadow: would block, 7 would-be refusals');
    expect(text.filter((l) => l.includes('account month UTC'))).toEqual([]);
    expect(text.every((l) => l.length <= 100)).toBe(true);
  });

  it('--json carries every budget, money as exact numbers', () => {
    const json = JSON.parse(figuresJson(deriveFigures(snapshot))) as { budgets: Record<string, unknown>[] };
    expect(json.budgets).toHaveLength(3);
    expect(json.budgets[2]).toMatchObject({
      id: 'b00000000003',
      spend: 2.00000001,
      state: 'would_block',
      shadow_refusals: 7,
    });
  });
});
