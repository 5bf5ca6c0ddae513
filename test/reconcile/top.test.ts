/** `meter top` shows the month's drift from each provider's own report, once a reconciliation ran. */
import { describe, expect, it } from 'vitest';
import { deriveFigures, type Snapshot } from '../../cli/top/derive.js';
import { figuresJson } from '../../cli/top/json.js';
import { frameLines, lineText } from '../../cli/top/layout.js';

const snapshot = (reconciliation: Snapshot['reconciliation']): Snapshot => ({
  account: 'acme',
  plan: 'pro',
  accounts: ['acme'],
  nowMs: Date.parse('2026-02-10T12:00:00Z'),
  intervalS: 1,
  windowS: 60,
  month: { spend: '0.775', requests: '10', budget: null, hard_cap: false, levels_fired: [] },
  byModel: [],
  tagKey: null,
  tagKeys: [],
  byTag: [],
  buckets: new Map(),
  events: [],
  tailSize: 5,
  reconciliation,
});

describe('meter top: reconciliation drift', () => {
  it('derives the drift per provider, prints one line and the JSON figures', () => {
    const f = deriveFigures(
      snapshot([
        { provider: 'anthropic', provider_cost: '2.00000000', meter_cost: '2.00100000', unknown: 0 },
        { provider: 'openai', provider_cost: '1.00000000', meter_cost: '0.77500000', unknown: 0 },
      ]),
    );
    expect(f.reconciliation).toEqual([
      { provider: 'anthropic', provider_cost: '2', meter_cost: '2.001', diff_usd: '0.001', diff_pct: '0.05' },
      { provider: 'openai', provider_cost: '1', meter_cost: '0.775', diff_usd: '-0.225', diff_pct: '-22.50' },
    ]);
    const lines = frameLines(f, { width: 100, height: 30 }).map(lineText);
    expect(lines.find((l) => l.startsWith('Drift '))).toBe(
      'Drift anthropic 0.05% ($2.00 vs $2.00 billed)  openai -22.50% ($0.78 vs $1.00 billed)',
    );
    expect(JSON.parse(figuresJson(f)).reconciliation[1]).toEqual({
      provider: 'openai',
      provider_cost: 1,
      meter_cost: 0.775,
      diff_usd: -0.225,
      diff_pct: -22.5,
    });
  });

  it('no line before any reconciliation, nor for a month whose provider cost is unknown', () => {
    for (const rows of [[], [{ provider: 'anthropic', provider_cost: null, meter_cost: '1', unknown: 3 }]]) {
      const f = deriveFigures(snapshot(rows));
      expect(f.reconciliation).toEqual([]);
      expect(
        frameLines(f, { width: 100, height: 30 })
          .map(lineText)
          .some((l) => l.startsWith('Drift')),
      ).toBe(false);
    }
  });
});
