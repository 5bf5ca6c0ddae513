/**
 * GETs of a provider's admin API: JSON pages, retried on 429 and 5xx with backoff (Retry-After
 * honoured), refused admin keys named by their variable. Messages never carry the key.
 */

import { MeterError } from '../errors.js';

export interface AdminApi {
  /** Base address, as the proxy's upstream (`https://api.openai.com/v1`). */
  baseUrl: string;
  headers: Record<string, string>;
  /** The variable the key came from, for error messages. */
  keyVariable: string;
  /** The key itself, only to scrub it from anything echoed back. */
  key: string;
  provider: string;
  /** What the key must be, for a refused key's message. */
  keyKind: string;
  retry?: Partial<RetryOptions>;
}

export interface RetryOptions {
  /** Attempts per page in all (the first included). */
  attempts: number;
  firstDelayMs: number;
  maxDelayMs: number;
  timeoutMs: number;
}

export const DEFAULT_RETRY: RetryOptions = { attempts: 5, firstDelayMs: 1_000, maxDelayMs: 30_000, timeoutMs: 30_000 };

/** A provider error the user acts on: one line, exit 1; nothing from the run is stored as complete. */
export class ProviderApiError extends MeterError {
  override name = 'ProviderApiError';
}

/** Query values: arrays are sent as `name[]=a&name[]=b`, as the official SDKs send them. */
export type Query = Record<string, string | number | string[] | undefined>;

export function queryString(query: Query): string {
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) {
    if (v === undefined) continue;
    if (Array.isArray(v)) for (const item of v) params.append(`${k}[]`, item);
    else params.append(k, String(v));
  }
  return params.toString();
}

/** Every page of a cursor-paginated report (`has_more`, `next_page`, sent back as `page`). */
export async function getAllPages<T>(api: AdminApi, path: string, query: Query, maxPages = 1_000): Promise<T[]> {
  const pages: T[] = [];
  let page: string | undefined;
  for (let i = 0; i < maxPages; i++) {
    const body = (await getJson(api, path, { ...query, page })) as T & { has_more?: unknown; next_page?: unknown };
    pages.push(body);
    if (body.has_more !== true) return pages;
    if (typeof body.next_page !== 'string' || body.next_page === '' || body.next_page === page) {
      throw new ProviderApiError(
        `${api.provider} ${path} said has_more but gave no new next_page: the report is incomplete`,
      );
    }
    page = body.next_page;
  }
  throw new ProviderApiError(`${api.provider} ${path} returned more than ${maxPages} pages: the report is incomplete`);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Seconds or an HTTP date, as ms from now; undefined when absent or unreadable. */
export function retryAfterMs(value: string | undefined, now = Date.now()): number | undefined {
  if (!value) return undefined;
  if (/^\d+(\.\d+)?$/.test(value.trim())) return Number(value) * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

async function getJson(api: AdminApi, path: string, query: Query): Promise<unknown> {
  const retry = { ...DEFAULT_RETRY, ...api.retry };
  const qs = queryString(query);
  const url = `${api.baseUrl.replace(/\/+$/, '')}${path}${qs ? `?${qs}` : ''}`;
  const scrub = (text: string) => (api.key ? text.split(api.key).join('***') : text);
  let last = '';
  for (let attempt = 1; attempt <= retry.attempts; attempt++) {
    let status: number;
    let text: string;
    let retryAfter: string | undefined;
    try {
      const res = await fetch(url, { headers: api.headers, signal: AbortSignal.timeout(retry.timeoutMs) });
      status = res.status;
      retryAfter = res.headers.get('retry-after') ?? undefined;
      text = await res.text();
    } catch (err) {
      status = 0;
      text = '';
      last = scrub(
        (err as Error).name === 'TimeoutError'
          ? `no answer within ${retry.timeoutMs} ms`
          : String((err as Error).message),
      );
    }
    if (status >= 200 && status < 300) {
      try {
        return JSON.parse(text);
      } catch {
        throw new ProviderApiError(`${api.provider} ${path} answered ${status} with a body that is not JSON`);
      }
    }
    const said = status ? `HTTP ${status}${providerMessage(text) ? `: ${scrub(providerMessage(text)!)}` : ''}` : last;
    if (status === 401 || status === 403) {
      throw new ProviderApiError(
        `${api.provider} refused ${api.keyVariable} (${said}): it must be ${api.keyKind}, not an ordinary API key`,
      );
    }
    if (status !== 0 && status !== 429 && status < 500) {
      throw new ProviderApiError(`${api.provider} ${path} answered ${said}`);
    }
    last = said;
    if (attempt === retry.attempts) break;
    const backoff = Math.min(retry.firstDelayMs * 2 ** (attempt - 1), retry.maxDelayMs);
    await sleep(Math.min(Math.max(retryAfterMs(retryAfter) ?? backoff, 0), Math.max(retry.maxDelayMs, backoff)));
  }
  throw new ProviderApiError(
    `${api.provider} ${path} still failing after ${retry.attempts} attempts (${last}); nothing was stored as complete`,
  );
}

/** The provider's own error message from its error body (OpenAI and Anthropic shapes), one line. */
function providerMessage(text: string): string | undefined {
  try {
    const body = JSON.parse(text) as { error?: { message?: unknown } | string; message?: unknown };
    const m = typeof body.error === 'object' ? body.error?.message : (body.error ?? body.message);
    return typeof m === 'string' ? m.replace(/\s+/g, ' ').slice(0, 300) : undefined;
  } catch {
    return undefined;
  }
}
