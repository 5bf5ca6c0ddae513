import { toUnits } from '../../src/money.js';
import { answerChat, eventually } from './fleet.js';
import type { FakeUpstream } from './upstreams.js';

// Every call of a burst is the same request: gpt-4o ($2.50 / MTok in, $10 / MTok out),
// max_tokens 500, so its worst case is known: ⌈bytes ÷ 3⌉ input tokens and 500 output tokens.
// It really uses 100 + 400.
export const BODY = JSON.stringify({
  model: 'gpt-4o',
  max_tokens: 500,
  messages: [{ role: 'user', content: 'hello' }],
});
export const WORST_TOKENS = Math.ceil(Buffer.byteLength(BODY) / 3) + 500;
export const WORST = toUnits(String(Math.ceil(Buffer.byteLength(BODY) / 3) * 2.5 + 500 * 10)) / 1_000_000n;
export const ACTUAL = toUnits('0.00425');

/** A chat completion with the fixed usage, answered once `gate` opens. */
export function answerAfter(upstream: FakeUpstream, gate: Promise<unknown>): void {
  answerChat(upstream, { prompt: 100, completion: 400 }, gate);
}

export function post(url: string, key: string, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${url}/proxy/openai/v1/chat/completions`, {
    method: 'POST',
    headers: {
      'x-meter-key': key,
      authorization: 'Bearer sk-provider',
      'content-type': 'application/json',
      ...headers,
    },
    body: BODY,
  });
}

export interface Answer {
  status: number;
  code: string | undefined;
  remaining: string | null;
}
export const answer = async (res: Response): Promise<Answer> => ({
  status: res.status,
  code: ((await res.json()) as { error?: { code?: string } }).error?.code,
  remaining: res.headers.get('ratelimit-remaining'),
});

/**
 * `calls` calls at once, spread over the daemons' URLs. The provider holds every admitted call
 * until every call is decided (admitted ones reached it, refused ones were answered), so every
 * decision is taken while all admitted calls are in flight with their worst case reserved: a
 * limit set for n calls admits exactly n, and a refusal while the fleet had room shows as fewer.
 */
export async function burst(
  upstream: FakeUpstream,
  urls: string[],
  key: string,
  { calls = 64, headers = {} }: { calls?: number; headers?: Record<string, string> } = {},
): Promise<Answer[]> {
  let open!: () => void;
  const gate = new Promise<void>((r) => (open = r));
  answerAfter(upstream, gate);
  const before = upstream.requests.length;
  let refused = 0;
  const answers = Array.from({ length: calls }, async (_, i) => {
    const res = await post(urls[i % urls.length]!, key, headers);
    if (res.status !== 200) refused++;
    return answer(res);
  });
  await eventually(
    async () => upstream.requests.length - before + refused === calls,
    30_000,
    'every call admitted or refused',
  );
  open();
  return Promise.all(answers);
}
