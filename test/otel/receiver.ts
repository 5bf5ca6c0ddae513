/**
 * TEST ONLY: an OTLP/HTTP receiver on loopback. meter's exporters send OTLP as JSON (the
 * `-http` exporters); this decodes what arrives at /v1/traces and /v1/metrics.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

type AnyValue = {
  stringValue?: string;
  intValue?: number | string;
  doubleValue?: number;
  boolValue?: boolean;
  arrayValue?: { values?: AnyValue[] };
};
type Value = string | number | boolean | Value[];
export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  startTimeUnixNano: string;
  endTimeUnixNano: string;
  attributes: Record<string, Value>;
  /** The instrumentation scope's schema URL (the conventions' version). */
  schemaUrl?: string;
  events: { name: string }[];
  status?: { code?: number };
}

const valueOf = (v: AnyValue): Value =>
  v.arrayValue
    ? (v.arrayValue.values ?? []).map(valueOf)
    : (v.stringValue ?? (v.intValue !== undefined ? Number(v.intValue) : undefined) ?? v.doubleValue ?? v.boolValue!);

const attrs = (list: { key: string; value: AnyValue }[] = []) =>
  Object.fromEntries(list.map((a) => [a.key, valueOf(a.value)]));

export interface Receiver {
  endpoint: string;
  spans: ReceivedSpan[];
  /** Every data point seen: metric name, its attributes, and the point as sent. */
  points: { metric: string; attributes: Record<string, Value>; point: unknown; schemaUrl?: string }[];
  close(): Promise<void>;
}

export async function startReceiver(): Promise<Receiver> {
  const spans: ReceivedSpan[] = [];
  const points: Receiver['points'] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}');
      if (req.url === '/v1/traces') {
        for (const rs of body.resourceSpans ?? [])
          for (const ss of rs.scopeSpans ?? [])
            for (const s of ss.spans ?? [])
              spans.push({ ...s, attributes: attrs(s.attributes), schemaUrl: ss.schemaUrl });
      } else if (req.url === '/v1/metrics') {
        for (const rm of body.resourceMetrics ?? [])
          for (const sm of rm.scopeMetrics ?? [])
            for (const m of sm.metrics ?? [])
              for (const p of (m.histogram ?? m.sum ?? m.gauge)?.dataPoints ?? [])
                points.push({ metric: m.name, attributes: attrs(p.attributes), point: p, schemaUrl: sm.schemaUrl });
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    spans,
    points,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** Waits until `check` holds (polling), or fails after `ms`. */
export async function until(check: () => boolean, ms = 10_000): Promise<void> {
  const t0 = Date.now();
  while (!check()) {
    if (Date.now() - t0 > ms) throw new Error('timed out waiting for telemetry');
    await new Promise((r) => setTimeout(r, 25));
  }
}
