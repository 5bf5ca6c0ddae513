import type { SendOutcome } from './types.js';

/** Enough of an error response to say why (Slack answers `invalid_payload`, and so on). */
const MAX_ERROR_BODY = 300;

/** POSTs a JSON body with a hard timeout; 2xx is success. Redirects are not followed: an
 *  incoming-webhook address that redirects is misconfigured. */
export async function postJson(
  url: string,
  body: string,
  headers: Record<string, string>,
  timeoutMs: number,
): Promise<SendOutcome> {
  try {
    // undici's full API is loaded on the first alert; the proxy itself needs only its Pool.
    const { request } = await import('undici');
    const res = await request(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'user-agent': 'meter-alerts', ...headers },
      body,
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
      signal: AbortSignal.timeout(timeoutMs),
    });
    const ok = res.statusCode >= 200 && res.statusCode < 300;
    let text = '';
    for await (const chunk of res.body) {
      if (ok || text.length >= MAX_ERROR_BODY) continue; // drain, keep only what we show
      text += (chunk as Buffer).toString('utf8');
    }
    const snippet = text.replace(/\s+/g, ' ').trim().slice(0, MAX_ERROR_BODY);
    if (ok) return { ok, statusCode: res.statusCode };
    const retryAfterS = Number(res.headers['retry-after'] ?? NaN);
    return {
      ok,
      statusCode: res.statusCode,
      error: `HTTP ${res.statusCode}${snippet ? `: ${snippet}` : ''}`,
      ...(Number.isFinite(retryAfterS) && retryAfterS >= 0 ? { retryAfterS } : {}),
    };
  } catch (err) {
    const e = err as Error & { code?: string };
    const error =
      e.name === 'TimeoutError' || e.code === 'UND_ERR_HEADERS_TIMEOUT' || e.code === 'UND_ERR_BODY_TIMEOUT'
        ? `no answer within ${timeoutMs} ms`
        : e.message;
    return { ok: false, error };
  }
}
