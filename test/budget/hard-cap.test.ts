import { describe, expect, it } from 'vitest';
import { HardCap, maxOutputTokens, DEFAULT_WORST_OUTPUT_TOKENS } from '../../src/budget/hard-cap.js';
import type { BudgetSnapshot } from '../../src/budget/monitor.js';
import { toUnits } from '../../src/budget/money.js';
import { Pricer } from '../../src/pricing/index.js';

const pricer = new Pricer();

function snapshot(budget: string, spend: string, hardCap = true, refreshedAt = new Date()): BudgetSnapshot {
  return {
    accountId: 'a', account: 'acme', month: '2026-11', budget, budgetUnits: toUnits(budget),
    hardCap, spend, spendUnits: toUnits(spend), levelsFired: [], refreshedAt,
  };
}

// gpt-4o: $2.50 / MTok input, $10 / MTok output (catalogue).
const body = (maxTokens?: number) =>
  Buffer.from(JSON.stringify({ model: 'gpt-4o', messages: [{ role: 'user', content: 'x'.repeat(283) }], ...(maxTokens ? { max_tokens: maxTokens } : {}) }));

function call(id: string, b = body(1000)) {
  return { id, accountId: 'a', provider: 'openai' as const, path: 'v1/chat/completions', body: b, bodyBytes: b.length, time: new Date('2026-11-21T12:00:00Z') };
}

describe('hard cap', () => {
  it('reads the output limit in every provider spelling', () => {
    expect(maxOutputTokens({ max_tokens: 100 })).toBe(100);
    expect(maxOutputTokens({ max_completion_tokens: 7, max_tokens: 100 })).toBe(7);
    expect(maxOutputTokens({ max_output_tokens: 50 })).toBe(50);
    expect(maxOutputTokens({ generationConfig: { maxOutputTokens: 64 } })).toBe(64);
    expect(maxOutputTokens({ model: 'x' })).toBeUndefined();
  });

  it('prices the worst case from max_tokens and the body size', () => {
    const cap = new HardCap({ budgetOf: () => snapshot('1', '0') }, pricer, 1_000);
    const c = call('1');
    // ceil(bytes / 3) input tokens at $2.50/MTok = 250 units of 1e-8 USD each; 1000 output
    // tokens at $10/MTok = 1000 units each.
    const inputTokens = Math.ceil(c.bodyBytes / 3);
    const expected = BigInt(inputTokens) * 250n + 1000n * 1000n;
    expect(cap.worstCase(c)).toBe(expected);
    // Without max_tokens: the model's context window bounds the output.
    const open = call('2', body());
    expect(cap.worstCase(open)).toBeGreaterThan(cap.worstCase(c));
    expect(DEFAULT_WORST_OUTPUT_TOKENS).toBeGreaterThan(0);
  });

  it('admits while spend plus calls in flight is below the budget, then refuses; settling frees the reservation', () => {
    // Budget $0.05, spend $0.03: each call reserves ~$0.0102 worst case.
    let snap = snapshot('0.05', '0.03');
    const cap = new HardCap({ budgetOf: () => snap }, pricer, 1_000);
    const worst = cap.worstCase(call('w'));
    const admitted: string[] = [];
    for (let i = 0; i < 10; i++) if (cap.admit(call(`c${i}`)).ok) admitted.push(`c${i}`);
    // Admitted while 0.03 + k × worst < 0.05.
    const k = Number((toUnits('0.02') + worst - 1n) / worst);
    expect(admitted).toHaveLength(k);
    const refused = cap.admit(call('late'));
    expect(refused.ok).toBe(false);
    expect(!refused.ok && refused.message).toMatch(/monthly budget of \$0.05 for account acme is reached/);

    // The calls end costing little: their real cost counts until the spend re-read has it.
    const now = Date.now();
    for (const id of admitted) cap.settle({ id, accountId: 'a', cost: '0.00010000' }, now);
    expect(cap.admit(call('after'), now).ok).toBe(true);
    cap.release('a', 'after');
    // A re-read well after they ended includes them in spend; local copies are dropped.
    snap = snapshot('0.05', '0.0499', true, new Date(now + 5_000));
    expect(cap.admit(call('x1'), now + 5_000).ok).toBe(true); // 0.0499 < 0.05
    expect(cap.admit(call('x2'), now + 5_000).ok).toBe(false); // + x1's worst case
  });

  it('does nothing for accounts without a hard cap', () => {
    const cap = new HardCap({ budgetOf: () => snapshot('0.01', '5', false) }, pricer, 1_000);
    expect(cap.applies('a')).toBe(false);
    expect(cap.admit(call('1'))).toEqual({ ok: true, reservedUnits: 0n });
  });
});
