import { request, type IncomingHttpHeaders, type OutgoingHttpHeaders } from 'node:http';

export interface RawResponse {
  status: number;
  statusMessage: string;
  headers: IncomingHttpHeaders;
  rawHeaders: string[];
  body: Buffer;
}

/** A plain node:http call: unlike fetch, it sends any header (Connection, TE, duplicates…)
 *  exactly as given, on a fresh connection. */
export function rawRequest(
  url: string,
  opts: { method?: string; headers?: OutgoingHttpHeaders | string[]; body?: string | Buffer } = {},
): Promise<RawResponse> {
  let headers = opts.headers;
  // A raw list is sent as is: HTTP/1.1 needs a Host, so add one unless the list has it.
  if (Array.isArray(headers) && !headers.some((h, i) => i % 2 === 0 && h.toLowerCase() === 'host')) {
    headers = ['Host', new URL(url).host, ...headers];
  }
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      { method: opts.method ?? 'GET', headers: headers as OutgoingHttpHeaders, agent: false },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({
            status: res.statusCode!,
            statusMessage: res.statusMessage!,
            headers: res.headers,
            rawHeaders: res.rawHeaders,
            body: Buffer.concat(chunks),
          }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(opts.body);
  });
}
