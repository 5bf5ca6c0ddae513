/**
 * A fake of the providers' organisation admin APIs on loopback: real HTTP, the documented
 * shapes (OpenAI: openai-openapi `UsageResponse` pages of `bucket`s with
 * `organization.usage.completions.result` / `organization.costs.result`; Anthropic: pages of
 * `{starting_at, ending_at, results}` buckets), one bucket per day of the asked range (empty
 * days included), rows grouped only by the asked `group_by[]` fields (the others null, numbers
 * summed), cursor pagination (`has_more`, `next_page`, sent back as `page`), and the providers'
 * auth and error bodies. Failures can be queued per path.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { atFileEnd } from '../helpers/cleanup.js';

export type Row = { date: string } & Record<string, unknown>;

export interface Failure {
  status: number;
  retryAfter?: string;
  body?: unknown;
}

export interface FakeAdminApi {
  url: string;
  /** Rows by path (`/v1/organization/costs`), each with the UTC day it belongs to. */
  rows: Record<string, Row[]>;
  /** Answers to give before the real one, by path (consumed in order). */
  failures: Record<string, Failure[]>;
  /** Every request: path, query and headers. */
  requests: { path: string; query: URLSearchParams; headers: IncomingMessage['headers'] }[];
  close(): Promise<void>;
}

const OPENAI_DIMS = ['model', 'project_id', 'api_key_id', 'user_id', 'batch', 'service_tier', 'line_item'];
const ANTHROPIC_DIMS = ['model', 'api_key_id', 'workspace_id', 'service_tier', 'context_window'];
/** Anthropic's cost_report fields filled only when grouping by description. */
const DESCRIPTION_FIELDS = ['description', 'model', 'token_type', 'cost_type', 'service_tier', 'context_window'];

function addInto(target: Record<string, unknown>, source: Record<string, unknown>): void {
  for (const [k, v] of Object.entries(source)) {
    if (typeof v === 'number') target[k] = (typeof target[k] === 'number' ? (target[k] as number) : 0) + v;
    else if (typeof v === 'string' && /^\d+(\.\d+)?$/.test(v) && k === 'amount')
      target[k] = String(Number(target[k] ?? 0) + Number(v));
    else if (v && typeof v === 'object' && !Array.isArray(v)) {
      const inner = (target[k] ??= {}) as Record<string, unknown>;
      addInto(inner, v as Record<string, unknown>);
    } else if (!(k in target)) target[k] = v;
  }
}

/** Rows of one day grouped by `groupBy`: the other dimensions null, numbers summed. */
function group(rows: Row[], dims: string[], groupBy: string[], anthropicCost: boolean): Record<string, unknown>[] {
  const out = new Map<string, Record<string, unknown>>();
  for (const { date: _date, ...row } of rows) {
    const fixed: Record<string, unknown> = {};
    const kept = anthropicCost
      ? [...groupBy.filter((g) => g !== 'description'), ...(groupBy.includes('description') ? DESCRIPTION_FIELDS : [])]
      : groupBy;
    for (const d of anthropicCost ? [...DESCRIPTION_FIELDS, 'workspace_id'] : dims)
      fixed[d] = kept.includes(d) ? (row[d] ?? null) : null;
    const key = JSON.stringify(fixed);
    const target = out.get(key) ?? { ...fixed };
    const rest = Object.fromEntries(Object.entries(row).filter(([k]) => !(k in fixed)));
    addInto(target, rest);
    out.set(key, target);
  }
  return [...out.values()];
}

export async function startFakeAdminApi(
  opts: { openaiKey?: string; anthropicKey?: string; pageSize?: number } = {},
): Promise<FakeAdminApi> {
  const pageSize = opts.pageSize ?? 2;
  const api: Omit<FakeAdminApi, 'url' | 'close'> = { rows: {}, failures: {}, requests: [] };
  const server: Server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    api.requests.push({ path: url.pathname, query: url.searchParams, headers: req.headers });
    const send = (status: number, body: unknown, headers: Record<string, string> = {}) => {
      res.writeHead(status, { 'content-type': 'application/json', ...headers });
      res.end(JSON.stringify(body));
    };
    const anthropic = url.pathname.startsWith('/v1/organizations/');
    // Auth first, in each provider's own error shape.
    if (anthropic) {
      if (req.headers['x-api-key'] !== opts.anthropicKey)
        return send(401, { type: 'error', error: { type: 'authentication_error', message: 'invalid x-api-key' } });
      if (!req.headers['anthropic-version'])
        return send(400, {
          type: 'error',
          error: { type: 'invalid_request_error', message: 'anthropic-version header is required' },
        });
    } else if (req.headers.authorization !== `Bearer ${opts.openaiKey}`) {
      return send(401, {
        error: {
          message: 'You have insufficient permissions for this operation. Missing scopes: api.usage.read.',
          type: 'invalid_request_error',
          code: null,
        },
      });
    }
    const failure = api.failures[url.pathname]?.shift();
    if (failure) {
      const body =
        failure.body ??
        (anthropic
          ? {
              type: 'error',
              error: {
                type: failure.status === 429 ? 'rate_limit_error' : 'api_error',
                message: `HTTP ${failure.status} from the fake`,
              },
            }
          : { error: { message: `HTTP ${failure.status} from the fake`, type: 'server_error', code: null } });
      return send(failure.status, body, failure.retryAfter === undefined ? {} : { 'retry-after': failure.retryAfter });
    }
    const rows = api.rows[url.pathname];
    if (!rows) return send(404, { error: { message: `no route ${url.pathname}` } });
    const groupBy = [...url.searchParams.getAll('group_by[]'), ...url.searchParams.getAll('group_by')];
    const q = (k: string) => url.searchParams.get(k);
    const start = anthropic ? Date.parse(q('starting_at')!) : Number(q('start_time')) * 1000;
    const end = anthropic ? Date.parse(q('ending_at')!) : Number(q('end_time')) * 1000;
    if (q('bucket_width') !== '1d' || !Number.isFinite(start) || !Number.isFinite(end))
      return send(400, { error: { message: 'bucket_width=1d and a start and end are required by this fake' } });
    const days: string[] = [];
    for (let t = start; t < end; t += 86_400_000) days.push(new Date(t).toISOString().slice(0, 10));
    const offset = Number(q('page') ? Buffer.from(q('page')!.replace(/^page_/, ''), 'base64').toString() : 0);
    const slice = days.slice(offset, offset + pageSize);
    const hasMore = offset + pageSize < days.length;
    const nextPage = hasMore ? `page_${Buffer.from(String(offset + pageSize)).toString('base64')}` : null;
    const costs = url.pathname.endsWith('/costs');
    const anthropicCost = url.pathname.endsWith('/cost_report');
    const dims = anthropic ? ANTHROPIC_DIMS : OPENAI_DIMS;
    const object = costs
      ? 'organization.costs.result'
      : url.pathname.endsWith('/embeddings')
        ? 'organization.usage.embeddings.result'
        : 'organization.usage.completions.result';
    const data = slice.map((day) => {
      const t0 = Date.parse(`${day}T00:00:00Z`);
      const results = group(
        rows.filter((r) => r.date === day),
        dims,
        groupBy,
        anthropicCost,
      ).map((r) => (anthropic ? r : { object, ...r }));
      return anthropic
        ? {
            starting_at: new Date(t0).toISOString().replace('.000Z', 'Z'),
            ending_at: new Date(t0 + 86_400_000).toISOString().replace('.000Z', 'Z'),
            results,
          }
        : { object: 'bucket', start_time: t0 / 1000, end_time: t0 / 1000 + 86_400, results };
    });
    send(
      200,
      anthropic
        ? { data, has_more: hasMore, next_page: nextPage }
        : { object: 'page', data, has_more: hasMore, next_page: nextPage },
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const close = () => new Promise<void>((resolve) => server.close(() => resolve()));
  atFileEnd(close);
  return { ...api, url: `http://127.0.0.1:${port}`, close } as FakeAdminApi;
}
