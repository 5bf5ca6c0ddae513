import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { claimKey } from '../../src/metering/batch-totals.js';
import { packageRoot } from '../../src/paths.js';
import { ZERO_COST } from '../../src/pricing/index.js';
import { getProvider } from '../../src/providers/index.js';
import type { ProviderSlug } from '../../src/providers/types.js';
import { meter, randomChunks } from './fixtures.js';

interface BatchFixture {
  slug: ProviderSlug;
  name: string;
  bytes: Buffer;
  expected: {
    why: string;
    path: string;
    id: string;
    events: {
      model: string;
      inputTokens: number;
      outputTokens: number;
      cachedInputTokens: number;
      cacheWriteTokens: number;
      reasoningTokens: number;
      units: Record<string, number> | null;
      cost: string;
    }[];
  };
}

const dir = join(packageRoot, 'test/fixtures/batch-results');
const fixtures: BatchFixture[] = readdirSync(dir)
  .sort()
  .flatMap((slug) =>
    readdirSync(join(dir, slug))
      .sort()
      .filter((f) => f.endsWith('.jsonl'))
      .map((f) => {
        const name = f.slice(0, -'.jsonl'.length);
        return {
          slug: slug as ProviderSlug,
          name,
          bytes: readFileSync(join(dir, slug, f)),
          expected: JSON.parse(
            readFileSync(join(dir, slug, `${name}.expected.json`), 'utf8'),
          ) as BatchFixture['expected'],
        };
      }),
  );

/** The content types the providers send a file with (neither says JSONL). */
const CONTENT_TYPE: Partial<Record<ProviderSlug, string>> = {
  anthropic: 'application/binary',
  openai: 'application/octet-stream',
};

function download(
  f: BatchFixture,
  chunks: Buffer[],
  extra: { completed?: boolean; status?: number; headers?: Record<string, string>; method?: string } = {},
) {
  return meter({
    slug: f.slug,
    path: f.expected.path,
    method: extra.method ?? 'GET',
    status: extra.status ?? 200,
    headers: { 'content-type': CONTENT_TYPE[f.slug]!, ...extra.headers },
    chunks,
    tags: { team: 'batch-jobs' },
    ...(extra.completed === undefined ? {} : { completed: extra.completed }),
  });
}

function expectNothingCharged(
  events: { cost: string; usageSource: string; claim?: string | null; inputTokens: number }[],
) {
  expect(events).toHaveLength(1);
  expect(events[0]!.cost).toBe(ZERO_COST);
  expect(events[0]!.usageSource).toBe('none');
  expect(events[0]!.inputTokens).toBe(0);
  expect(events[0]!.claim).toBeUndefined();
}

describe('batch results downloaded through the proxy', () => {
  it('has fixtures for both providers, with two models in one file and a file without usage', () => {
    expect(new Set(fixtures.map((f) => f.slug))).toEqual(new Set(['anthropic', 'openai']));
    expect(fixtures.some((f) => f.expected.events.length === 2)).toBe(true);
    expect(fixtures.some((f) => f.expected.events.length === 0)).toBe(true);
  });

  for (const f of fixtures) {
    describe(`${f.slug}/${f.name}.jsonl`, () => {
      it('a whole download: one event per model at the batch price, claimed, hand-worked, in any chunking', async () => {
        for (const seed of [1, 7, 42]) {
          const { events } = await download(f, randomChunks(f.bytes, seed, seed === 1 ? 5 : 300));
          if (f.expected.events.length === 0) {
            expectNothingCharged(events);
            continue;
          }
          expect(
            events.map((e) => ({
              model: e.model,
              inputTokens: e.inputTokens,
              outputTokens: e.outputTokens,
              cachedInputTokens: e.cachedInputTokens,
              cacheWriteTokens: e.cacheWriteTokens,
              reasoningTokens: e.reasoningTokens,
              units: e.units,
              cost: e.cost,
            })),
          ).toEqual(f.expected.events);
          for (const e of events) {
            expect(e).toMatchObject({
              requestedModel: e.model,
              serviceTier: 'batch',
              usageSource: 'provider',
              unpriced: false,
              status: 200,
              stream: false,
              tags: { team: 'batch-jobs' },
              claim: `${f.slug}:${f.expected.id}:${e.model}`,
            });
          }
          expect(new Set(events.map((e) => e.id)).size).toBe(events.length);
          expect(new Set(events.map((e) => e.time)).size).toBe(1);
        }
      });

      it('the same events when the file comes gzip-encoded, or one byte at a time', async () => {
        const plain = (await download(f, [f.bytes])).events;
        const strip = (es: typeof plain) => es.map(({ id, latencyMs, ttfbMs, time, ...rest }) => rest);
        const gz = gzipSync(f.bytes);
        const gzipped = await download(f, randomChunks(gz, 3, 40), { headers: { 'content-encoding': 'gzip' } });
        expect(strip(gzipped.events)).toEqual(strip(plain));
        const bytewise = await download(
          f,
          Array.from({ length: f.bytes.length }, (_, i) => f.bytes.subarray(i, i + 1)),
        );
        expect(strip(bytewise.events)).toEqual(strip(plain));
      });

      it('a download cut short, a failed one and a POST to the same path charge nothing', async () => {
        expectNothingCharged(
          (await download(f, [f.bytes.subarray(0, f.bytes.length - 10)], { completed: false })).events,
        );
        expectNothingCharged(
          (await download(f, [Buffer.from('{"error":{"type":"not_found_error"}}')], { status: 404 })).events,
        );
        expectNothingCharged((await download(f, [f.bytes], { method: 'POST' })).events);
        // gzip cut off mid-stream: the decoder fails, nothing is charged
        const gz = gzipSync(f.bytes);
        expectNothingCharged(
          (await download(f, [gz.subarray(0, gz.length - 8)], { headers: { 'content-encoding': 'gzip' } })).events,
        );
      });
    });
  }

  it("other GETs (a batch, a file's metadata, a stored response) are not batch results", () => {
    expect(
      getProvider('anthropic')!.batchResults!({ path: 'v1/messages/batches/msgbatch_1', body: undefined }),
    ).toBeUndefined();
    expect(getProvider('openai')!.batchResults!({ path: 'v1/files/file-1', body: undefined })).toBeUndefined();
    expect(getProvider('openai')!.batchResults!({ path: 'v1/responses/resp_1', body: undefined })).toBeUndefined();
    expect(
      getProvider('anthropic')!.batchResults!({ path: 'messages/batches/msgbatch_2/results', body: undefined })?.id,
    ).toBe('msgbatch_2');
    expect(getProvider('openai')!.batchResults!({ path: 'v1/files/file-%41b/content', body: undefined })?.id).toBe(
      'file-Ab',
    );
  });

  it("every line is priced on its own: a long-context threshold applies per request, never to the file's sum", async () => {
    // claude-sonnet-4-5 is $3 / $15 up to 200k input tokens, $6 / $22.50 above. Two requests of
    // 150k input and 1k output, at the batch tier (half): 2 × (150000×3 + 1000×15)/2 = 465000 µ$.
    // Priced as one 300k request it would be (300000×6 + 1000×22.5)/2 = 911250 µ$.
    const line = (n: number) =>
      JSON.stringify({
        custom_id: `r${n}`,
        result: {
          type: 'succeeded',
          message: {
            id: `msg_${n}`,
            type: 'message',
            role: 'assistant',
            model: 'claude-sonnet-4-5-20250929',
            content: [],
            stop_reason: 'end_turn',
            usage: {
              input_tokens: 150_000,
              output_tokens: 1000,
              cache_creation_input_tokens: 0,
              cache_read_input_tokens: 0,
            },
          },
        },
      });
    const bytes = Buffer.from(`${line(1)}\n${line(2)}\n`);
    const { events } = await meter({
      slug: 'anthropic',
      path: 'v1/messages/batches/msgbatch_lc/results',
      method: 'GET',
      status: 200,
      headers: { 'content-type': 'application/binary' },
      chunks: [bytes],
    });
    expect(events.map((e) => [e.inputTokens, e.outputTokens, e.cost])).toEqual([[300_000, 2000, '0.46500000']]);
  });

  it('claim keys are bounded: a long one is hashed', () => {
    expect(claimKey('openai', 'file-abc', 'gpt-4o-mini')).toBe('openai:file-abc:gpt-4o-mini');
    const long = claimKey('openai', 'file-abc', 'm'.repeat(300));
    expect(long).toMatch(/^openai:sha256:[0-9a-f]{64}$/);
    expect(claimKey('openai', 'file-abc', 'm'.repeat(300))).toBe(long);
    expect(claimKey('openai', 'file-abd', 'm'.repeat(300))).not.toBe(long);
  });
});
