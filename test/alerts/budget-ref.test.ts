/** A budget alert names its budget (CONTRACT §6): in the webhook body after the contract's
 *  fields, and in the chat and e-mail text. */
import { describe, expect, it } from 'vitest';
import { alertFacts, alertHeadline, webhookBody, type BudgetAlert } from '../../src/alerts/alert.js';

const alert: BudgetAlert = {
  id: '7d1f8a52-3c1e-4a5b-9f7e-2b8c9d0e1f23',
  type: 'budget.threshold',
  account: 'acme',
  month: '2026-11',
  level: 85,
  spend: '42.50000001',
  budget: '50',
  utilization_pct: '85',
  top_models: [],
  top_tags: [],
  created_at: '2026-11-26T10:00:00.000Z',
  budget_ref: {
    budget_id: '3f9a0c7e21b4',
    scope: { kind: 'tag', key: 'tenant', value: 'globex' },
    window: 'day',
    timezone: 'Asia/Kolkata',
    window_start: '2026-11-26T00:00:00+05:30',
    window_end: '2026-11-27T00:00:00+05:30',
  },
};

describe('budget alerts name their budget', () => {
  it('webhook body: the contract fields, then the budget id, scope, window, zone and window bounds', () => {
    const body = JSON.parse(webhookBody(alert)) as Record<string, unknown>;
    expect(Object.keys(body)).toEqual([
      'id',
      'type',
      'account',
      'month',
      'level',
      'spend',
      'budget',
      'utilization_pct',
      'top_models',
      'top_tags',
      'created_at',
      'budget_id',
      'scope',
      'window',
      'timezone',
      'window_start',
      'window_end',
    ]);
    expect(body).toMatchObject({ budget_id: '3f9a0c7e21b4', scope: { kind: 'tag', key: 'tenant', value: 'globex' } });
    expect(webhookBody(alert)).toContain('"spend":42.50000001');
  });

  it('chat and e-mail text', () => {
    expect(alertHeadline(alert)).toBe(
      'Budget alert: acme has reached 85% of budget 3f9a0c7e21b4 (tag tenant=globex, day in Asia/Kolkata)',
    );
    expect(alertFacts(alert)).toContainEqual([
      'Window',
      'day in Asia/Kolkata: 2026-11-26T00:00:00+05:30 to 2026-11-27T00:00:00+05:30',
    ]);
    expect(alertFacts(alert)).toContainEqual(['Amount', '$50']);
  });
});
