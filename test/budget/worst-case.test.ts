import { describe, expect, it } from 'vitest';
import {
  choices,
  DEFAULT_WORST_OUTPUT_TOKENS,
  maxOutputTokens,
  worstCaseTokens,
  worstCaseUnits,
} from '../../src/budget/worst-case.js';
import { Pricer } from '../../src/pricing/index.js';

const pricer = new Pricer();

// gpt-4o: $2.50 / MTok input, $10 / MTok output (catalogue).
const body = (maxTokens?: number) =>
  Buffer.from(
    JSON.stringify({
      model: 'gpt-4o',
      messages: [{ role: 'user', content: 'x'.repeat(283) }],
      ...(maxTokens ? { max_tokens: maxTokens } : {}),
    }),
  );

function call(b = body(1000)) {
  return {
    provider: 'openai' as const,
    path: 'v1/chat/completions',
    body: b,
    bodyBytes: b.length,
    time: new Date('2026-11-21T12:00:00Z'),
  };
}

describe("a call's worst case (the hard cap's and the tokens-a-minute limits' reservation)", () => {
  it('reads the output limit in every provider spelling', () => {
    expect(maxOutputTokens({ max_tokens: 100 })).toBe(100);
    expect(maxOutputTokens({ max_completion_tokens: 7, max_tokens: 100 })).toBe(7);
    expect(maxOutputTokens({ max_output_tokens: 50 })).toBe(50);
    expect(maxOutputTokens({ generationConfig: { maxOutputTokens: 64 } })).toBe(64);
    expect(maxOutputTokens({ model: 'x' })).toBeUndefined();
  });

  it('prices the worst case from max_tokens and the body size', () => {
    const c = call();
    // ceil(bytes / 3) input tokens at $2.50/MTok = 250 units of 1e-8 USD each; 1000 output
    // tokens at $10/MTok = 1000 units each.
    const inputTokens = Math.ceil(c.bodyBytes / 3);
    const expected = BigInt(inputTokens) * 250n + 1000n * 1000n;
    expect(worstCaseUnits(pricer, c)).toBe(expected);
    expect(worstCaseTokens(c)).toEqual({ model: 'gpt-4o', inputTokens, outputTokens: 1000 });
    // Without max_tokens: the model's context window bounds the output.
    const open = call(body());
    expect(worstCaseUnits(pricer, open)).toBeGreaterThan(worstCaseUnits(pricer, c) as bigint);
    expect(worstCaseTokens(open)!.outputTokens).toBe(128_000 - Math.ceil(open.bodyBytes / 3));
    expect(DEFAULT_WORST_OUTPUT_TOKENS).toBeGreaterThan(0);
  });

  it('reserves a body too large to read whole at its byte length as input plus the model window, never 0', () => {
    const whole = body(1000);
    const bytes = 5 * 1024 * 1024;
    const big = { ...call(), body: undefined, bodyBytes: bytes, head: whole.subarray(0, 200) };
    // 5 MiB at a token a byte: 5,242,880 × $2.50/MTok = $13.1072 of input alone, whatever max_tokens says.
    const worst = worstCaseUnits(pricer, big)!;
    expect(worst).toBeGreaterThan(BigInt(bytes) * 250n);
    // `model` nested in a tool schema is not the request's model; none at the top level: unknown.
    const nested = Buffer.from(
      '{"tools":[{"input_schema":{"model":"gpt-4o-mini"}}],"messages":[{"role":"user","content":"' + 'x'.repeat(100),
    );
    expect(worstCaseUnits(pricer, { ...big, head: nested })).toBeUndefined();
    expect(worstCaseTokens({ ...big, head: nested })).toBeUndefined();
    // A call that names no model costs nothing and counts no tokens.
    const none = Buffer.from('{"input":"x"}');
    expect(worstCaseUnits(pricer, call(none))).toBe(0n);
  });

  it('multiplies the output by the choices asked for, in every provider spelling', () => {
    expect(choices({ n: 128 })).toBe(128);
    expect(choices({ generationConfig: { candidateCount: 4 } })).toBe(4);
    expect(choices({ config: { candidateCount: 3 } })).toBe(3);
    expect(choices({ num_generations: 5 })).toBe(5);
    expect(choices({ n: 'many' })).toBe(1);
    const many = Buffer.from(JSON.stringify({ model: 'gpt-4o', n: 128, max_tokens: 1000, messages: [] }));
    expect(worstCaseTokens(call(many))!.outputTokens).toBe(128_000);
    // A model meter has no price for cannot be bounded: said as such, never as $0.
    const unknown = Buffer.from(JSON.stringify({ model: 'gpt-9-imaginary', max_tokens: 10, messages: [] }));
    expect(worstCaseUnits(pricer, call(unknown))).toBe('unpriced');
  });
});
