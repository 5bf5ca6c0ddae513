/**
 * Tokenizer estimate for a call whose response carried no usage (an OpenAI or xAI stream
 * without `stream_options.include_usage`, a stream cut short): recorded with
 * usage_source "estimated", never as a silent $0. o200k_base is exact for current OpenAI
 * models and a fair approximation for the others.
 */
import { createRequire } from 'node:module';
import { obj } from './common.js';
import type { RequestInfo, StreamAccumulator, Usage } from './types.js';

/** Beyond this many characters text is not tokenised but counted at ~4 characters a token. */
const MAX_TOKENIZED_CHARS = 1 << 20;
/** Chat framing the models add around each message, and to prime the reply (OpenAI's count). */
const PER_MESSAGE_TOKENS = 3;
const REPLY_PRIMING_TOKENS = 3;

/** gpt-tokenizer's o200k tables cost about 70 MB of memory: loaded on the first estimate (most
 *  responses carry usage, so many daemons never need it), synchronously from its CommonJS build. */
let tokenizer: typeof import('gpt-tokenizer') | undefined;
function countTokens(text: string, options: typeof NO_SPECIAL): number {
  tokenizer ??= createRequire(import.meta.url)('gpt-tokenizer') as typeof import('gpt-tokenizer');
  return tokenizer.countTokens(text, options);
}

const NO_SPECIAL = { allowedSpecial: new Set<string>(), disallowedSpecial: new Set<string>() };

/** Tokens in a text; `totalChars` (when more text was seen than kept) scales the count up. */
export function estimateTextTokens(text: string, totalChars = text.length): number {
  if (text.length === 0) return Math.ceil(totalChars / 4);
  let tokens: number;
  if (text.length > MAX_TOKENIZED_CHARS) {
    const head = text.slice(0, MAX_TOKENIZED_CHARS);
    tokens = countTokens(head, NO_SPECIAL) + Math.ceil((text.length - head.length) / 4);
  } else {
    tokens = countTokens(text, NO_SPECIAL); // special-token text is counted as plain text
  }
  if (totalChars > text.length) tokens = Math.ceil((tokens * totalChars) / text.length);
  return tokens;
}

/** Top-level request fields that hold the input, across the nine providers' request bodies. */
const INPUT_FIELDS = [
  'system',
  'messages', // OpenAI-compatible, Anthropic, Cohere v2
  'contents',
  'systemInstruction',
  'system_instruction', // Gemini
  'prompt',
  'input',
  'instructions', // legacy completions, embeddings, responses
  'message',
  'chat_history',
  'preamble',
  'documents',
  'texts', // Cohere v1, embed
  'tools',
  'functions',
];
const MESSAGE_LISTS = new Set(['messages', 'contents', 'chat_history']);
/** Keys whose strings are binary payloads, opaque ids or tags (roles are in the per-message
 *  framing), not text the model reads as tokens. */
const SKIP_KEYS = new Set([
  'role',
  'type',
  'cache_control',
  'media_type',
  'mime_type',
  'mimeType',
  'data',
  'image_url',
  'inlineData',
  'inline_data',
  'fileData',
  'file_data',
  'source',
  'signature',
  'thoughtSignature',
  'thought_signature',
  'encrypted_content',
  'id',
  'tool_call_id',
]);

interface Walk {
  parts: string[];
  chars: number;
  /** Token ids given directly (`input: [[1, 2, 3]]`). */
  ids: number;
}

function walk(v: unknown, w: Walk, depth: number): void {
  if (depth > 32) return;
  if (typeof v === 'string') {
    if (v.startsWith('data:')) return; // data URI
    w.chars += v.length;
    if (w.chars <= MAX_TOKENIZED_CHARS * 4) w.parts.push(v);
  } else if (typeof v === 'number') {
    w.ids++;
  } else if (Array.isArray(v)) {
    for (const x of v) walk(x, w, depth + 1);
  } else if (typeof v === 'object' && v !== null) {
    for (const [k, x] of Object.entries(v)) {
      if (!SKIP_KEYS.has(k) && typeof x !== 'number') walk(x, w, depth + 1);
    }
  }
}

/** Estimated input tokens of a provider request body (messages/contents/prompt/input/message…). */
export function estimateInputTokens(body: unknown): number {
  const b = obj(body);
  if (!b) return 0;
  const w: Walk = { parts: [], chars: 0, ids: 0 };
  let framing = 0;
  for (const f of INPUT_FIELDS) {
    const v = b[f];
    if (v === undefined || v === null) continue;
    if (MESSAGE_LISTS.has(f) && Array.isArray(v)) framing += v.length * PER_MESSAGE_TOKENS;
    walk(v, w, 0);
  }
  if (framing > 0) framing += REPLY_PRIMING_TOKENS;
  const text = w.parts.join('\n');
  return estimateTextTokens(text, Math.max(w.chars, text.length)) + w.ids + framing;
}

/** Usage estimated from the request and, for a stream, the text generated so far. */
export function estimateUsage(
  req: RequestInfo,
  stream?: Pick<StreamAccumulator, 'streamedText' | 'streamedChars'>,
): Usage {
  const text = stream?.streamedText() ?? '';
  const chars = stream?.streamedChars?.() ?? text.length;
  return {
    inputTokens: estimateInputTokens(req.body),
    outputTokens: chars > 0 ? estimateTextTokens(text, chars) : 0,
    cachedInputTokens: 0,
    cacheWriteTokens: 0,
    cacheWrite1hTokens: 0,
    reasoningTokens: 0,
  };
}
