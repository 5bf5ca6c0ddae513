import { describe, expect, it } from 'vitest';
import { HardCap, maxOutputTokens, DEFAULT_WORST_OUTPUT_TOKENS } from '../../src/budget/hard-cap.js';
import type { BudgetSnapshot } from '../../src/budget/monitor.js';
import { toUnits } from '../../src/money.js';
import { Pricer } from '../../src/pricing/index.js';

const pricer = new Pricer();

function snapshot(budget: string, spend: string, hardCap = true, refreshedAt = new Date()): BudgetSnapshot {
  return {
    accountId: 'a',
    account: 'acme',
    month: '2026-11',
    budget,
    budgetUnits: toUnits(budget),
    hardCap,
    spend,
    spendUnits: toUnits(spend),
    levelsFired: [],
    refreshedAt,
  };
}

// gpt-4o: $2.50 / MTok input, $10 / MTok output (catalogue).
const body = (maxTokens?: number) =>
  Buffer.from(
    JSON.stringify({
      model: 'gpt-4o',
      messages: [{ role: 'user', content: 'x'.repeat(283) }],
      ...(maxTokens ? { max_tokens: maxTokens } : {}),
    }),
  );

function call(id: string, b = body(1000)) {
  return {
    id,
    accountId: 'a',
    provider: 'openai' as const,
    path: 'v1/chat/completions',
    body: b,
    bodyBytes: b.length,
    time: new Date('2026-11-21T12:00:00Z'),
  };
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
    const cap = new HardCap({ budgetOf: () => snapshot('1', '0') }, pricer);
    const c = call('1');
    // ceil(bytes / 3) input tokens at $2.50/MTok = 250 units of 1e-8 USD each; 1000 output
    // tokens at $10/MTok = 1000 units each.
    const inputTokens = Math.ceil(c.bodyBytes / 3);
    const expected = BigInt(inputTokens) * 250n + 1000n * 1000n;
    expect(cap.worstCase(c)).toBe(expected);
    // Without max_tokens: the model's context window bounds the output.
    const open = call('2', body());
    expect(cap.worstCase(open)).toBeGreaterThan(cap.worstCase(c)!);
    expect(DEFAULT_WORST_OUTPUT_TOKENS).toBeGreaterThan(0);
  });

  it('admits while spend plus calls in flight is below the budget, then refuses; an ended call counts until a re-read shows it', () => {
    // Budget $0.05, spend $0.03: each call reserves ~$0.0102 worst case.
    let snap = snapshot('0.05', '0.03');
    const cap = new HardCap({ budgetOf: () => snap }, pricer);
    const worst = cap.worstCase(call('w'))!;
    const admitted: string[] = [];
    for (let i = 0; i < 10; i++) if (cap.admit(call(`c${i}`)).ok) admitted.push(`c${i}`);
    // Admitted while 0.03 + k × worst < 0.05.
    const k = Number((toUnits('0.02') + worst - 1n) / worst);
    expect(admitted).toHaveLength(k);
    expect(cap.pendingUnits('a', '2026-11')).toBe(BigInt(k) * worst);
    const refused = cap.admit(call('late'));
    expect(refused.ok).toBe(false);
    expect(!refused.ok && refused.message).toMatch(/monthly budget of \$0.05 for account acme is reached/);

    // The calls end costing $0.0001 each: only that counts now, until a re-read shows them.
    const time = '2026-11-21T12:00:00.000Z';
    for (const id of admitted) cap.settle({ id, accountId: 'a', cost: '0.00010000', time });
    expect(cap.pendingUnits('a', '2026-11')).toBe(BigInt(k) * 10_000n);
    expect(
      cap
        .unseenEvents()
        .map((e) => e.id)
        .sort(),
    ).toEqual([...admitted].sort());
    // A re-read whose snapshot holds the first of them: its spend has it, the ledger drops it.
    snap = snapshot('0.05', '0.0301');
    cap.seen([admitted[0]!], '2026-11');
    expect(snap.spendUnits + cap.pendingUnits('a', '2026-11')).toBe(toUnits('0.03') + BigInt(k) * 10_000n);
    // A re-read that shows none of them changes nothing; an unknown id is ignored.
    cap.seen(['nope'], '2026-11');
    expect(cap.pendingUnits('a', '2026-11')).toBe(BigInt(k - 1) * 10_000n);
    // Settling twice, or an event that was never admitted here, counts nothing.
    cap.settle({ id: admitted[1]!, accountId: 'a', cost: '1', time });
    cap.settle({ id: 'other', accountId: 'a', cost: '1', time });
    expect(cap.pendingUnits('a', '2026-11')).toBe(BigInt(k - 1) * 10_000n);
    // A new month: last month's unseen costs no longer count, and are forgotten at the next re-read.
    expect(cap.pendingUnits('a', '2026-12')).toBe(0n);
    cap.seen([], '2026-12');
    expect(cap.unseenEvents()).toEqual([]);
  });

  it('a call released before forwarding frees its reservation', () => {
    const cap = new HardCap({ budgetOf: () => snapshot('1', '0') }, pricer);
    expect(cap.admit(call('r')).ok).toBe(true);
    expect(cap.pendingUnits('a', '2026-11')).toBeGreaterThan(0n);
    cap.release('a', 'r');
    expect(cap.pendingUnits('a', '2026-11')).toBe(0n);
  });

  it('reserves a body too large to read whole at its byte length as input plus the model window, never 0', () => {
    const cap = new HardCap({ budgetOf: () => snapshot('100', '0') }, pricer);
    const whole = body(1000);
    const bytes = 5 * 1024 * 1024;
    const big = { ...call('big'), body: undefined, bodyBytes: bytes, head: whole.subarray(0, 200) };
    // 5 MiB at a token a byte: 5,242,880 × $2.50/MTok = $13.1072 of input alone, whatever max_tokens says.
    const worst = cap.worstCase(big)!;
    expect(worst).toBeGreaterThan(BigInt(bytes) * 250n);
    // `model` nested in a tool schema is not the request's model; none at the top level: unknown.
    const nested = Buffer.from(
      '{"tools":[{"input_schema":{"model":"gpt-4o-mini"}}],"messages":[{"role":"user","content":"' + 'x'.repeat(100),
    );
    expect(cap.worstCase({ ...big, head: nested })).toBeUndefined();
    // An unknown worst case holds everything left of the budget: no other call fits beside it.
    const snap = snapshot('0.05', '0.01');
    const tight = new HardCap({ budgetOf: () => snap }, pricer);
    expect(tight.admit({ ...big, id: 'u', head: nested })).toEqual({ ok: true, reservedUnits: toUnits('0.04') });
    expect(tight.admit(call('next')).ok).toBe(false);
    tight.release('a', 'u');
    expect(tight.admit(call('next')).ok).toBe(true);
  });

  it('does nothing for accounts without a hard cap', () => {
    const cap = new HardCap({ budgetOf: () => snapshot('0.01', '5', false) }, pricer);
    expect(cap.applies('a')).toBe(false);
    expect(cap.admit(call('1'))).toEqual({ ok: true, reservedUnits: 0n });
  });
});
