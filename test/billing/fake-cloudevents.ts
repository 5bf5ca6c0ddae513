/**
 * A fake CloudEvents receiver (as a metering service's ingest endpoint): accepts only
 * `application/cloudevents-batch+json`, checks each event's required CloudEvents 1.0 attributes,
 * keeps each `source` + `id` once and counts the ones it had already. Tests plan failures.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { atFileEnd } from '../helpers/cleanup.js';

export interface ReceivedCloudEvent {
  specversion: string;
  id: string;
  source: string;
  type: string;
  subject?: string;
  time?: string;
  datacontenttype?: string;
  data: {
    cost_usd: string;
    billed_usd: string;
    input_tokens: number;
    output_tokens: number;
    model: string;
    provider: string;
    tags: Record<string, string>;
  };
}

export interface FakeCloudEvents {
  url: string;
  events: ReceivedCloudEvent[];
  duplicates: number;
  batches: number;
  plan(...answers: { status: number; retryAfterS?: number; body?: string }[]): void;
  close(): Promise<void>;
}

function answer(res: ServerResponse, status: number, body: string, headers: Record<string, string> = {}) {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(body);
}

export async function startFakeCloudEvents(): Promise<FakeCloudEvents> {
  const seen = new Set<string>();
  const planned: { status: number; retryAfterS?: number; body?: string }[] = [];
  const state: FakeCloudEvents = {
    url: '',
    events: [],
    duplicates: 0,
    batches: 0,
    plan: (...answers) => planned.push(...answers),
    close: async () => {},
  };

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    if (req.method !== 'POST') return answer(res, 405, '{"title":"method not allowed"}');
    if (req.headers['content-type'] !== 'application/cloudevents-batch+json')
      return answer(res, 415, `{"title":"unsupported content type ${req.headers['content-type']}"}`);
    const next = planned.shift();
    if (next) {
      const headers: Record<string, string> =
        next.retryAfterS === undefined ? {} : { 'retry-after': String(next.retryAfterS) };
      return answer(res, next.status, next.body ?? `{"title":"planned ${next.status}"}`, headers);
    }
    let batch: ReceivedCloudEvent[];
    try {
      batch = JSON.parse(Buffer.concat(chunks).toString('utf8')) as ReceivedCloudEvent[];
    } catch {
      return answer(res, 400, '{"title":"not JSON"}');
    }
    if (!Array.isArray(batch)) return answer(res, 400, '{"title":"a batch is a JSON array"}');
    for (const e of batch) {
      if (e.specversion !== '1.0' || !e.id || !e.source || !e.type)
        return answer(res, 400, '{"title":"each event needs specversion 1.0, id, source and type"}');
    }
    state.batches++;
    for (const e of batch) {
      const key = `${e.source}\u0000${e.id}`;
      if (seen.has(key)) state.duplicates++;
      else {
        seen.add(key);
        state.events.push(e);
      }
    }
    answer(res, 204, '');
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((err: Error) => answer(res, 500, JSON.stringify({ title: err.message })));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/v1/events`;
  state.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  atFileEnd(state.close);
  return state;
}
