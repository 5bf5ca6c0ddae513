import { readFileSync } from 'node:fs';
import { countTokens } from 'gpt-tokenizer';
import { describe, expect, it } from 'vitest';
import { estimateInputTokens, estimateTextTokens, estimateUsage } from '../../src/providers/estimate.js';
import { providers } from '../../src/providers/index.js';
import { FIXTURES, runStream, type Expected } from './helpers.js';

describe('tokenizer estimate', () => {
  it('gives non-zero input and output for an OpenAI stream that carried no usage', () => {
    const bytes = readFileSync(new URL('openai/chat-stream-no-usage.sse', FIXTURES));
    const exp = JSON.parse(
      readFileSync(new URL('openai/chat-stream-no-usage.expected.json', FIXTURES), 'utf8'),
    ) as Expected;
    const { acc } = runStream(providers.openai, exp.request, 'sse', [bytes]);
    expect(acc.result().usage).toBeUndefined();
    const u = estimateUsage(exp.request, acc);
    expect(u.outputTokens).toBe(countTokens('Paris is the capital of France.'));
    // 2 messages: their text, 3 framing tokens each, 3 to prime the reply
    const text = 'Answer in one sentence.\nWhat is the capital of France?';
    expect(u.inputTokens).toBe(countTokens(text) + 2 * 3 + 3);
    expect(u.cachedInputTokens + u.cacheWriteTokens + u.reasoningTokens).toBe(0);
  });

  it('reads the input field of every provider request shape', () => {
    const shapes: unknown[] = [
      { model: 'm', messages: [{ role: 'user', content: [{ type: 'text', text: 'hello there' }] }] },
      { model: 'm', system: 'be brief', messages: [{ role: 'user', content: 'hello there' }] },
      {
        contents: [{ role: 'user', parts: [{ text: 'hello there' }] }],
        systemInstruction: { parts: [{ text: 'be brief' }] },
      },
      { model: 'command-r', message: 'hello there', preamble: 'be brief' },
      { model: 'o4-mini', input: 'hello there', instructions: 'be brief' },
      { model: 'text-embedding-3-small', input: ['hello there', 'general kenobi'] },
      { model: 'gpt-3.5-turbo-instruct', prompt: 'hello there' },
    ];
    for (const body of shapes) expect(estimateInputTokens(body), JSON.stringify(body)).toBeGreaterThan(1);
  });

  it('counts token-id input directly and skips binary payloads', () => {
    expect(
      estimateInputTokens({
        input: [
          [1, 2, 3],
          [4, 5],
        ],
      }),
    ).toBe(5);
    const image = { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'A'.repeat(100000) } };
    const withImage = estimateInputTokens({
      messages: [{ role: 'user', content: [image, { type: 'text', text: 'hi' }] }],
    });
    expect(withImage).toBeLessThan(20);
    const uri = { type: 'image_url', image_url: { url: `data:image/png;base64,${'A'.repeat(100000)}` } };
    expect(estimateInputTokens({ messages: [{ role: 'user', content: [uri] }] })).toBeLessThan(20);
  });

  it('treats special-token text as plain text and scales text past the kept cap', () => {
    expect(estimateTextTokens('a <|endoftext|> b')).toBeGreaterThan(3);
    const t = estimateTextTokens('hello world', 'hello world'.length * 10);
    expect(t).toBe(countTokens('hello world') * 10);
    expect(estimateTextTokens('', 40)).toBe(10);
    expect(estimateInputTokens(undefined)).toBe(0);
  });
});
