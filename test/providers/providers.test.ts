import { describe, expect, it } from 'vitest';
import { StreamFramer } from '../../src/providers/framing.js';
import { getProvider, providers } from '../../src/providers/index.js';
import { PROVIDER_SLUGS, type Provider, type RequestInfo } from '../../src/providers/index.js';

const BASES: Record<string, string> = {
  openai: 'https://api.openai.com/v1',
  anthropic: 'https://api.anthropic.com/v1',
  groq: 'https://api.groq.com/openai/v1',
  gemini: 'https://generativelanguage.googleapis.com',
  mistral: 'https://api.mistral.ai/v1',
  together: 'https://api.together.xyz/v1',
  cohere: 'https://api.cohere.com/v1',
  deepseek: 'https://api.deepseek.com',
  xai: 'https://api.x.ai/v1',
};

function sse(p: Provider, req: RequestInfo, text: string) {
  const acc = p.streamAccumulator(req);
  const f = new StreamFramer('sse', acc);
  f.push(Buffer.from(text));
  f.flush();
  return acc.result();
}

describe('registry', () => {
  it('has the nine providers with CONTRACT §2 base addresses', () => {
    expect(Object.keys(providers).sort()).toEqual([...PROVIDER_SLUGS].sort());
    for (const slug of PROVIDER_SLUGS) {
      expect(getProvider(slug)?.slug).toBe(slug);
      expect(getProvider(slug)?.defaultBaseUrl).toBe(BASES[slug]);
    }
  });

  it('knows no other slug, prototype names included', () => {
    for (const s of ['bedrock', '', 'constructor', '__proto__', 'toString', 'OpenAI'])
      expect(getProvider(s)).toBeUndefined();
  });

  it('reads the requested model from the body, or from the path for Gemini', () => {
    expect(providers.openai.requestModel({ path: 'v1/chat/completions', body: { model: 'gpt-4o' } })).toBe('gpt-4o');
    expect(providers.openai.requestModel({ path: 'v1/chat/completions', body: undefined })).toBeUndefined();
    const g = providers.gemini;
    expect(g.requestModel({ path: 'v1beta/models/gemini-2.5-pro:streamGenerateContent', body: {} })).toBe(
      'gemini-2.5-pro',
    );
    expect(g.requestModel({ path: 'models/gemini-2.0-flash:generateContent', body: undefined })).toBe(
      'gemini-2.0-flash',
    );
    expect(g.requestModel({ path: 'v1beta/tunedModels/my-tune-1:generateContent', body: undefined })).toBe('my-tune-1');
    expect(g.requestModel({ path: 'v1beta/files', body: undefined })).toBeUndefined();
  });
});

describe('stream details', () => {
  it('flags an OpenAI-compatible error chunk and keeps any usage', () => {
    const r = sse(
      providers.openai,
      { path: 'v1/chat/completions', body: { model: 'gpt-4o' } },
      'data: {"choices":[{"delta":{"content":"Hi"}}],"model":"gpt-4o-2024-08-06"}\n\n' +
        'data: {"error":{"message":"The server had an error","type":"server_error"}}\n\n',
    );
    expect(r).toEqual({ model: 'gpt-4o-2024-08-06', error: true });
  });

  it('flags a responses stream that ends in response.failed, with its usage', () => {
    const r = sse(
      providers.openai,
      { path: 'v1/responses', body: { model: 'gpt-4.1' } },
      'event: response.failed\ndata: {"type":"response.failed","response":{"model":"gpt-4.1-2025-04-14","status":"failed",' +
        '"error":{"code":"server_error","message":"x"},"usage":{"input_tokens":5,"output_tokens":2}}}\n\n',
    );
    expect(r.error).toBe(true);
    expect(r.usage?.inputTokens).toBe(5);
    expect(r.model).toBe('gpt-4.1-2025-04-14');
  });

  it('does not let Groq cache statistics replace a real usage', () => {
    const r = sse(
      providers.groq,
      { path: 'openai/v1/chat/completions', body: { model: 'llama' } },
      'data: {"model":"llama","choices":[],"usage":{"prompt_tokens":4,"completion_tokens":2}}\n\n' +
        'data: {"model":"llama","choices":[],"x_groq":{"id":"req_1","usage":{"dram_cached_tokens":0,"sram_cached_tokens":0}}}\n\n',
    );
    expect(r.usage).toMatchObject({ inputTokens: 4, outputTokens: 2 });
  });

  it('marks an Anthropic stream cut after message_start as incomplete', () => {
    const r = sse(
      providers.anthropic,
      { path: 'v1/messages', body: { model: 'claude-x' } },
      'event: message_start\ndata: {"type":"message_start","message":{"model":"claude-x-1","usage":{"input_tokens":9,"output_tokens":1}}}\n\n' +
        'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}\n\n',
    );
    expect(r).toMatchObject({ model: 'claude-x-1', incomplete: true, usage: { inputTokens: 9, outputTokens: 1 } });
  });

  it("keeps a long chat stream's text whole and in order, past the events it keeps unread", () => {
    const acc = providers.openai.streamAccumulator({ path: 'v1/chat/completions', body: { model: 'gpt-4o-mini' } });
    const pieces = Array.from({ length: 3000 }, (_, i) => `piece ${i}; `);
    for (const p of pieces) acc.onEvent(JSON.stringify({ model: 'gpt-4o-mini', choices: [{ delta: { content: p } }] }));
    // The events hold 200 kB: the first are read when the bound is passed, the rest as they come.
    expect(acc.streamedText()).toBe(pieces.join(''));
    expect(acc.streamedChars?.()).toBe(pieces.join('').length);
    acc.onEvent('{"choices":[{"delta":{"content":"!"}}]}');
    expect(acc.streamedText()).toBe(`${pieces.join('')}!`);
  });

  it('reads Anthropic events by their data type when the event: line is missing', () => {
    const acc = providers.anthropic.streamAccumulator({ path: 'v1/messages', body: {} });
    acc.onEvent('{"type":"message_start","message":{"model":"m","usage":{"input_tokens":3,"output_tokens":1}}}');
    acc.onEvent('{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"ok"}}');
    acc.onEvent('{"type":"message_delta","delta":{},"usage":{"output_tokens":5}}');
    expect(acc.result()).toMatchObject({ usage: { inputTokens: 3, outputTokens: 5 } });
    expect(acc.streamedText()).toBe('ok');
  });

  it('flags a Gemini error chunk and a Cohere v2 message-end error', () => {
    const g = sse(
      providers.gemini,
      { path: 'v1beta/models/gemini-2.5-flash:streamGenerateContent', body: {} },
      'data: {"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}}\r\n\r\n',
    );
    expect(g).toEqual({ model: 'gemini-2.5-flash', error: true });
    const c = sse(
      providers.cohere,
      { path: 'v2/chat', body: { model: 'command-a' } },
      'event: message-end\ndata: {"type":"message-end","delta":{"error":"internal","finish_reason":"ERROR"}}\n\n',
    );
    expect(c).toEqual({ model: 'command-a', error: true });
  });

  it('reads a result twice the same way (lazy parse is cached)', () => {
    const acc = providers.gemini.streamAccumulator({ path: 'v1beta/models/g:streamGenerateContent', body: {} });
    acc.onEvent('{"candidates":[],"usageMetadata":{"promptTokenCount":2,"candidatesTokenCount":1}}');
    expect(acc.result()).toEqual(acc.result());
    acc.onEvent('{"candidates":[],"usageMetadata":{"promptTokenCount":2,"candidatesTokenCount":4}}');
    expect(acc.result().usage?.outputTokens).toBe(4);
  });
});
