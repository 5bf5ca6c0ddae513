import Anthropic from '@anthropic-ai/sdk';
import { GoogleGenAI } from '@google/genai';
import { Mistral } from '@mistralai/mistralai';
import { HTTPClient } from '@mistralai/mistralai/lib/http.js';
import { CohereClient, CohereClientV2 } from 'cohere-ai';
import Groq from 'groq-sdk';
import OpenAI from 'openai';
import Together from 'together-ai';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { packageRoot } from '../../src/paths.js';
import type { ProviderSlug } from '../../src/providers/types.js';

/** The provider's own credential, as the application holds it. */
export const PROVIDER_KEY = 'prov-test-key-0123456789';

export function fixture(path: string): string {
  return readFileSync(join(packageRoot, 'test/fixtures/providers', path), 'utf8');
}

export interface Scenario {
  /** Response body the fake provider sends (a fixture). */
  body: string;
  contentType: string;
  /** Path and query the provider must receive. */
  upstreamPath: string;
  /** What the SDK must hand the application. */
  text: string;
}

/** One provider's official SDK pointed at the daemon, and the wire format of its fake. */
export interface SdkAdapter {
  slug: ProviderSlug;
  sdk: string;
  /** The provider's real base path: the fake is configured as METER_UPSTREAM = origin + basePath. */
  basePath: string;
  /** How the service key travels next to the provider key. */
  keyStyle: 'x-meter-key' | 'x-provider-authorization';
  /** The header (lower case) and value the provider must see its credential in. */
  credential: [header: string, value: string];
  chat: Scenario;
  stream: Scenario;
  /** Runs one call through the SDK and returns the generated text. */
  call(baseUrl: string, serviceKey: string, stream: boolean): Promise<string>;
}

/** Tagging headers every SDK sends: the provider must never see them. */
export const TAG_HEADERS = {
  'X-Metering-Tags': 'team=search,env=test',
  'X-Feature-Name': 'chat',
  'X-Tenant-ID': 't-1',
};

const SSE = 'text/event-stream';
const JSON_TYPE = 'application/json';
const bearer = `Bearer ${PROVIDER_KEY}`;
const msg = [{ role: 'user' as const, content: 'Hi' }];

function openAIStyle(
  slug: ProviderSlug,
  basePath: string,
  files: [string, string],
  streamText: string,
  keyStyle: SdkAdapter['keyStyle'],
): SdkAdapter {
  const path = `${basePath}/chat/completions`;
  return {
    slug,
    sdk: 'openai',
    basePath,
    keyStyle,
    credential: ['authorization', bearer],
    chat: {
      body: fixture(files[0]),
      contentType: JSON_TYPE,
      upstreamPath: path,
      text: JSON.parse(fixture(files[0])).choices[0].message.content,
    },
    stream: { body: fixture(files[1]), contentType: SSE, upstreamPath: path, text: streamText },
    async call(baseUrl, serviceKey, stream) {
      const client =
        keyStyle === 'x-meter-key'
          ? new OpenAI({
              apiKey: PROVIDER_KEY,
              baseURL: `${baseUrl}/proxy/${slug}`,
              defaultHeaders: { ...TAG_HEADERS, 'X-Meter-Key': serviceKey },
              maxRetries: 0,
            })
          : new OpenAI({
              apiKey: serviceKey,
              baseURL: `${baseUrl}/proxy/${slug}`,
              defaultHeaders: { ...TAG_HEADERS, 'X-Provider-Authorization': bearer },
              maxRetries: 0,
            });
      if (!stream)
        return (await client.chat.completions.create({ model: 'm', messages: msg })).choices[0]!.message.content ?? '';
      let text = '';
      const s = await client.chat.completions.create({
        model: 'm',
        messages: msg,
        stream: true,
        stream_options: { include_usage: true },
      });
      for await (const chunk of s) text += chunk.choices[0]?.delta?.content ?? '';
      return text;
    },
  };
}

export const adapters: SdkAdapter[] = [
  openAIStyle(
    'openai',
    '/v1',
    ['openai/chat.json', 'openai/chat-stream-usage.sse'],
    'Hello! How can I "help" you today? 😊',
    'x-provider-authorization',
  ),
  openAIStyle(
    'deepseek',
    '',
    ['deepseek/chat-cache-hit.json', 'deepseek/stream-cache-miss.sse'],
    '你好！有什么可以帮你的吗？',
    'x-meter-key',
  ),
  openAIStyle(
    'xai',
    '/v1',
    ['xai/chat-reasoning.json', 'xai/stream-reasoning.sse'],
    'Hey there!',
    'x-provider-authorization',
  ),
  {
    slug: 'anthropic',
    sdk: '@anthropic-ai/sdk',
    basePath: '/v1',
    keyStyle: 'x-meter-key',
    // @anthropic-ai/sdk 1.x sends its apiKey as Authorization: Bearer (DESIGN.md).
    credential: ['authorization', bearer],
    chat: {
      body: fixture('anthropic/message.json'),
      contentType: JSON_TYPE,
      upstreamPath: '/v1/messages',
      text: "The book's central theme is the cost of ambition.",
    },
    stream: {
      body: fixture('anthropic/stream.sse'),
      contentType: SSE,
      upstreamPath: '/v1/messages',
      text: 'Here\'s a short poem:\n\nÉté — the "sun" stays late. ☀️',
    },
    async call(baseUrl, serviceKey, stream) {
      const client = new Anthropic({
        apiKey: PROVIDER_KEY,
        baseURL: `${baseUrl}/proxy/anthropic`,
        defaultHeaders: { ...TAG_HEADERS, 'X-Meter-Key': serviceKey },
        maxRetries: 0,
      });
      const params = { model: 'claude-test-model', max_tokens: 64, messages: msg };
      if (!stream) {
        const m = await client.messages.create(params);
        return m.content.map((b) => (b.type === 'text' ? b.text : '')).join('');
      }
      let text = '';
      for await (const e of await client.messages.create({ ...params, stream: true })) {
        if (e.type === 'content_block_delta' && e.delta.type === 'text_delta') text += e.delta.text;
      }
      return text;
    },
  },
  {
    slug: 'groq',
    sdk: 'groq-sdk',
    basePath: '/openai/v1',
    keyStyle: 'x-provider-authorization',
    credential: ['authorization', bearer],
    chat: {
      body: fixture('groq/chat.json'),
      contentType: JSON_TYPE,
      upstreamPath: '/openai/v1/chat/completions',
      text: JSON.parse(fixture('groq/chat.json')).choices[0].message.content,
    },
    stream: {
      body: fixture('groq/stream-triple.sse'),
      contentType: SSE,
      upstreamPath: '/openai/v1/chat/completions',
      text: 'Hello world',
    },
    async call(baseUrl, serviceKey, stream) {
      const client = new Groq({
        apiKey: serviceKey,
        baseURL: `${baseUrl}/proxy/groq`,
        defaultHeaders: { ...TAG_HEADERS, 'X-Provider-Authorization': bearer },
        maxRetries: 0,
      });
      if (!stream)
        return (await client.chat.completions.create({ model: 'm', messages: msg })).choices[0]!.message.content ?? '';
      let text = '';
      for await (const c of await client.chat.completions.create({ model: 'm', messages: msg, stream: true }))
        text += c.choices[0]?.delta?.content ?? '';
      return text;
    },
  },
  {
    slug: 'gemini',
    sdk: '@google/genai',
    basePath: '',
    keyStyle: 'x-meter-key',
    credential: ['x-goog-api-key', PROVIDER_KEY],
    chat: {
      body: fixture('gemini/generate.json'),
      contentType: JSON_TYPE,
      upstreamPath: '/v1beta/models/gemini-2.5-flash:generateContent',
      text: 'AI learns patterns from data to make predictions.',
    },
    stream: {
      body: fixture('gemini/stream.sse'),
      contentType: SSE,
      upstreamPath: '/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse',
      text: 'The quick brown fox jumps over the lazy dog — ünïcödé ✓',
    },
    async call(baseUrl, serviceKey, stream) {
      const ai = new GoogleGenAI({
        apiKey: PROVIDER_KEY,
        httpOptions: { baseUrl: `${baseUrl}/proxy/gemini`, headers: { ...TAG_HEADERS, 'X-Meter-Key': serviceKey } },
      });
      const params = { model: 'gemini-2.5-flash', contents: 'Hi' };
      if (!stream) return (await ai.models.generateContent(params)).text ?? '';
      let text = '';
      for await (const c of await ai.models.generateContentStream(params)) text += c.text ?? '';
      return text;
    },
  },
  {
    slug: 'mistral',
    sdk: '@mistralai/mistralai',
    basePath: '/v1',
    keyStyle: 'x-provider-authorization',
    credential: ['authorization', bearer],
    chat: {
      body: fixture('mistral/chat.json'),
      contentType: JSON_TYPE,
      upstreamPath: '/v1/chat/completions',
      text: JSON.parse(fixture('mistral/chat.json')).choices[0].message.content,
    },
    stream: {
      body: fixture('mistral/stream.sse'),
      contentType: SSE,
      upstreamPath: '/v1/chat/completions',
      text: 'Bonjour à tous !',
    },
    async call(baseUrl, serviceKey, stream) {
      const httpClient = new HTTPClient();
      httpClient.addHook('beforeRequest', (req) => {
        const headers = new Headers(req.headers);
        headers.set('X-Provider-Authorization', bearer);
        for (const [k, v] of Object.entries(TAG_HEADERS)) headers.set(k, v);
        return new Request(req, { headers });
      });
      const client = new Mistral({ apiKey: serviceKey, serverURL: `${baseUrl}/proxy/mistral`, httpClient });
      if (!stream) {
        const r = await client.chat.complete({ model: 'mistral-small-latest', messages: msg });
        return String(r.choices?.[0]?.message?.content ?? '');
      }
      let text = '';
      for await (const e of await client.chat.stream({ model: 'mistral-small-latest', messages: msg })) {
        const c = e.data.choices[0]?.delta?.content;
        if (typeof c === 'string') text += c;
      }
      return text;
    },
  },
  {
    slug: 'together',
    sdk: 'together-ai',
    basePath: '/v1',
    keyStyle: 'x-meter-key',
    credential: ['authorization', bearer],
    chat: {
      body: fixture('together/chat.json'),
      contentType: JSON_TYPE,
      upstreamPath: '/v1/chat/completions',
      text: JSON.parse(fixture('together/chat.json')).choices[0].message.content,
    },
    stream: {
      body: fixture('together/stream.sse'),
      contentType: SSE,
      upstreamPath: '/v1/chat/completions',
      text: 'Hi!',
    },
    async call(baseUrl, serviceKey, stream) {
      const client = new Together({
        apiKey: PROVIDER_KEY,
        baseURL: `${baseUrl}/proxy/together`,
        defaultHeaders: { ...TAG_HEADERS, 'X-Meter-Key': serviceKey },
        maxRetries: 0,
      });
      if (!stream)
        return (await client.chat.completions.create({ model: 'm', messages: msg })).choices[0]?.message?.content ?? '';
      let text = '';
      for await (const c of await client.chat.completions.create({ model: 'm', messages: msg, stream: true }))
        text += c.choices[0]?.delta?.content ?? '';
      return text;
    },
  },
  {
    slug: 'cohere',
    sdk: 'cohere-ai',
    basePath: '/v1',
    keyStyle: 'x-meter-key',
    credential: ['authorization', bearer],
    chat: {
      body: fixture('cohere/chat-v1.json'),
      contentType: JSON_TYPE,
      upstreamPath: '/v1/chat',
      text: JSON.parse(fixture('cohere/chat-v1.json')).text,
    },
    stream: {
      body: fixture('cohere/chat-v1-stream.ndjson'),
      contentType: 'application/stream+json',
      upstreamPath: '/v1/chat',
      text: 'Hello! How can I help you today?',
    },
    async call(baseUrl, serviceKey, stream) {
      const client = new CohereClient({
        token: PROVIDER_KEY,
        baseUrl: `${baseUrl}/proxy/cohere`,
        headers: { ...TAG_HEADERS, 'X-Meter-Key': serviceKey },
        maxRetries: 0,
      });
      if (!stream) return (await client.chat({ model: 'command-r', message: 'Hi' })).text;
      let text = '';
      for await (const e of await client.chatStream({ model: 'command-r', message: 'Hi' })) {
        if (e.eventType === 'text-generation') text += e.text;
      }
      return text;
    },
  },
];

/** Cohere's v2 client on the same `/v1` base: `v2/chat` replaces the version segment. */
export async function cohereV2Chat(baseUrl: string, serviceKey: string): Promise<string> {
  const client = new CohereClientV2({
    token: PROVIDER_KEY,
    baseUrl: `${baseUrl}/proxy/cohere`,
    headers: { ...TAG_HEADERS, 'X-Meter-Key': serviceKey },
    maxRetries: 0,
  });
  const r = await client.chat({ model: 'command-a-03-2025', messages: [{ role: 'user', content: 'Hi' }] });
  return (r.message.content ?? []).map((c) => ('text' in c ? c.text : '')).join('');
}
