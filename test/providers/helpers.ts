import { readdirSync, readFileSync } from 'node:fs';
import { getProvider } from '../../src/providers/index.js';
import { StreamFramer, type StreamFormat } from '../../src/providers/framing.js';
import type { Provider, RequestInfo, StreamAccumulator, UsageResult } from '../../src/providers/types.js';

export const FIXTURES = new URL('../fixtures/providers/', import.meta.url);

export interface Expected {
  why: string;
  request: RequestInfo;
  model?: string;
  usage: Record<string, number | string> | null;
  error?: boolean;
  incomplete?: boolean;
  text?: string;
}

export interface Fixture {
  slug: string;
  name: string;
  file: string;
  kind: 'json' | StreamFormat;
  bytes: Buffer;
  expected: Expected;
  provider: Provider;
}

const KINDS: Record<string, Fixture['kind']> = { json: 'json', sse: 'sse', ndjson: 'ndjson' };

export function loadFixtures(): Fixture[] {
  const out: Fixture[] = [];
  for (const slug of readdirSync(FIXTURES).sort()) {
    const dir = new URL(`${slug}/`, FIXTURES);
    const provider = getProvider(slug);
    if (!provider) throw new Error(`fixture folder for unknown provider ${slug}`);
    for (const file of readdirSync(dir).sort()) {
      if (file.endsWith('.expected.json')) continue;
      const dot = file.lastIndexOf('.');
      const kind = KINDS[file.slice(dot + 1)];
      if (!kind) throw new Error(`unexpected fixture file ${slug}/${file}`);
      const name = file.slice(0, dot);
      const expected = JSON.parse(readFileSync(new URL(`${name}.expected.json`, dir), 'utf8')) as Expected;
      out.push({ slug, name, file, kind, bytes: readFileSync(new URL(file, dir)), expected, provider });
    }
  }
  return out;
}

/** A result in the fixtures' JSON form (bigint ticks as a decimal string). */
export function normalise(r: UsageResult): Omit<Expected, 'why' | 'request' | 'text'> {
  const usage = r.usage
    ? Object.fromEntries(Object.entries(r.usage).map(([k, v]) => [k, typeof v === 'bigint' ? v.toString() : v]))
    : null;
  const out: Omit<Expected, 'why' | 'request' | 'text'> = { usage };
  if (r.model !== undefined) out.model = r.model;
  if (r.error) out.error = true;
  if (r.incomplete) out.incomplete = true;
  return out;
}

export function expectedOf(e: Expected): Omit<Expected, 'why' | 'request' | 'text'> {
  const out: Omit<Expected, 'why' | 'request' | 'text'> = { usage: e.usage };
  if (e.model !== undefined) out.model = e.model;
  if (e.error) out.error = true;
  if (e.incomplete) out.incomplete = true;
  return out;
}

/** Feeds the stream in the given reads; returns the accumulator and the framer. */
export function runStream(
  provider: Provider,
  req: RequestInfo,
  format: StreamFormat,
  reads: Uint8Array[],
): { acc: StreamAccumulator; framer: StreamFramer } {
  const acc = provider.streamAccumulator(req);
  const framer = new StreamFramer(format, acc);
  for (const r of reads) framer.push(r);
  framer.flush();
  return { acc, framer };
}

/** Same stream with other line ends: LF → CRLF or CR, CRLF → LF. */
export function withLineEnds(bytes: Buffer, eol: '\n' | '\r\n' | '\r'): Buffer {
  const lf = bytes.toString('latin1').replace(/\r\n?/g, '\n');
  return Buffer.from(eol === '\n' ? lf : lf.replace(/\n/g, eol), 'latin1');
}
