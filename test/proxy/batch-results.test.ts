import Anthropic from '@anthropic-ai/sdk';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import OpenAI from 'openai';
import { beforeAll, expect, it } from 'vitest';
import { createAccount } from '../../src/auth/accounts.js';
import { createKey } from '../../src/auth/keys.js';
import type { MeteringSetup } from '../../src/metering/index.js';
import { packageRoot } from '../../src/paths.js';
import type { Daemon } from '../../src/server/daemon.js';
import { startShippedDaemon } from '../helpers/shipped-daemon.js';
import { describeEachBackend } from '../helpers/stores.js';
import { startFakeUpstream, type FakeUpstream } from '../helpers/upstreams.js';
import { PROVIDER_KEY } from './sdk-adapters.js';

/**
 * End to end: the official SDKs download batch results twice through the daemon as shipped;
 * the store holds one charge per model, at the batch price, and the second download's events
 * cost nothing. Expected costs are the fixtures' hand-worked ones
 * (test/fixtures/batch-results/*.expected.json).
 */
const fixture = (p: string) => readFileSync(join(packageRoot, 'test/fixtures/batch-results', p));
const ANTHROPIC_RESULTS = fixture('anthropic/results.jsonl');
const OPENAI_OUTPUT = fixture('openai/output.jsonl');
const BATCH_ID = 'msgbatch_01HkcTjaV5uDC8jWR4ZsDV8d';
const FILE_ID = 'file-4dGjhUAf8rMZSgXe6rYj8k';

describeEachBackend('batch results downloaded through the daemon with the official SDKs', (backend) => {
  let daemon: Daemon;
  let setup!: MeteringSetup;
  let key: string;
  let anthropicUpstream: FakeUpstream;

  beforeAll(async () => {
    anthropicUpstream = await startFakeUpstream();
    anthropicUpstream.respond((req, res) => {
      if (req.url!.startsWith(`/v1/messages/batches/${BATCH_ID}/results`)) {
        // gzip-encoded, as the API may send a large file; the SDK decodes it, so does metering
        res.writeHead(200, { 'content-type': 'application/binary', 'content-encoding': 'gzip' });
        const gz = gzipSync(ANTHROPIC_RESULTS);
        res.write(gz.subarray(0, 100));
        res.end(gz.subarray(100));
        return;
      }
      // The batch names where its results are. Anthropic names its own origin, and the SDK
      // follows that absolute URL, past the proxy; here it names the proxy, as a client that
      // rewrites results_url (or fetches the path itself) would reach it.
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          id: BATCH_ID,
          type: 'message_batch',
          processing_status: 'ended',
          request_counts: { processing: 0, succeeded: 3, errored: 1, canceled: 1, expired: 1 },
          ended_at: '2026-11-24T10:00:00Z',
          created_at: '2026-11-24T09:00:00Z',
          expires_at: '2026-11-25T09:00:00Z',
          archived_at: null,
          cancel_initiated_at: null,
          results_url: `${daemon.url}/proxy/anthropic/v1/messages/batches/${BATCH_ID}/results`,
        }),
      );
    });
    const openaiUpstream = await startFakeUpstream();
    openaiUpstream.respond((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      res.end(OPENAI_OUTPUT);
    });
    ({ daemon, setup } = await startShippedDaemon(await backend.config(), {
      METER_UPSTREAM_ANTHROPIC: `${anthropicUpstream.origin}/v1`,
      METER_UPSTREAM_OPENAI: `${openaiUpstream.origin}/v1`,
    }));
    await createAccount(daemon.store, 'batches', 'pro');
    key = (await createKey(daemon.store, 'batches', 'e2e')).key;
    return () => daemon.close();
  });

  /** Events of batch results, in download order, each download's models in the file's order.
   *  The proxy meters a call when its response has ended, which can be after the SDK has read the
   *  last byte (a gzip body is decoded asynchronously): wait until `n` events are there. */
  async function batchEvents(provider: string, n: number) {
    const deadline = Date.now() + 5_000;
    for (;;) {
      await setup.writer.drain();
      const rows = await daemon.store.query<{
        model: string;
        cost: string;
        usage_source: string;
        input: number;
        tags: unknown;
      }>(
        `SELECT model, cost::text AS cost, usage_source, input_tokens::int AS input, tags FROM usage_events
          WHERE provider = $1 AND service_tier = 'batch' ORDER BY time, event_id`,
        [provider],
      );
      if (rows.length >= n || Date.now() > deadline) return rows;
      await new Promise((r) => setTimeout(r, 20));
    }
  }
  async function spend(provider: string) {
    return daemon.store.query<{ model: string; spend: string; requests: number }>(
      `SELECT model, sum(spend)::text AS spend, sum(requests)::int AS requests FROM usage_daily
        WHERE provider = $1 AND model <> 'unknown' GROUP BY model ORDER BY model`,
      [provider],
    ); // a run may span midnight
  }

  it('Anthropic: client.messages.batches.results() twice, one charge per model', async () => {
    const client = new Anthropic({
      apiKey: PROVIDER_KEY,
      baseURL: `${daemon.url}/proxy/anthropic`,
      maxRetries: 0,
      defaultHeaders: { 'X-Meter-Key': key, 'X-Metering-Tags': 'team=research' },
    });
    for (let i = 0; i < 2; i++) {
      const seen: string[] = [];
      for await (const line of await client.messages.batches.results(BATCH_ID))
        seen.push(`${line.custom_id}:${line.result.type}`);
      expect(seen).toEqual([
        'req-1:succeeded',
        'req-2:errored',
        'req-3:succeeded',
        'req-4:canceled',
        'req-5:expired',
        'req-6:succeeded',
      ]);
    }
    expect(anthropicUpstream.requests.filter((r) => r.url.endsWith('/results'))).toHaveLength(2);
    const charged = { usage_source: 'provider', tags: { team: 'research' } };
    const nothing = { cost: '0.00000000', usage_source: 'none', input: 0, tags: { team: 'research' } };
    expect(await batchEvents('anthropic', 4)).toEqual([
      { model: 'claude-haiku-4-5-20251001', cost: '0.00140240', input: 3148, ...charged },
      { model: 'claude-sonnet-4-5-20250929', cost: '0.00393750', input: 1500, ...charged },
      { model: 'claude-haiku-4-5-20251001', ...nothing },
      { model: 'claude-sonnet-4-5-20250929', ...nothing },
    ]);
    // the two batch lookups are calls too (they used nothing); the rollups hold the charge once
    expect(await spend('anthropic')).toEqual([
      { model: 'claude-haiku-4-5-20251001', spend: '0.00140240', requests: 2 },
      { model: 'claude-sonnet-4-5-20250929', spend: '0.00393750', requests: 2 },
    ]);
  }, 30_000);

  it('OpenAI: client.files.content() of a batch output file twice, one charge per model', async () => {
    const client = new OpenAI({
      apiKey: PROVIDER_KEY,
      baseURL: `${daemon.url}/proxy/openai`,
      maxRetries: 0,
      defaultHeaders: { 'X-Meter-Key': key },
    });
    for (let i = 0; i < 2; i++) {
      const res = await client.files.content(FILE_ID);
      expect(Buffer.from(await res.arrayBuffer()).equals(OPENAI_OUTPUT)).toBe(true);
    }
    expect(
      (await batchEvents('openai', 4)).map(({ model, cost, usage_source }) => [model, cost, usage_source]),
    ).toEqual([
      ['gpt-4o-mini-2024-07-18', '0.00012000', 'provider'],
      ['gpt-4.1-mini-2025-04-14', '0.00048640', 'provider'],
      ['gpt-4o-mini-2024-07-18', '0.00000000', 'none'],
      ['gpt-4.1-mini-2025-04-14', '0.00000000', 'none'],
    ]);
    expect(await spend('openai')).toEqual([
      { model: 'gpt-4.1-mini-2025-04-14', spend: '0.00048640', requests: 2 },
      { model: 'gpt-4o-mini-2024-07-18', spend: '0.00012000', requests: 2 },
    ]);
  }, 30_000);
});
