import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { packageRoot } from '../../src/paths.js';
import { MeteringService } from '../../src/metering/metering.js';
import { uuidv7 } from '../../src/metering/ids.js';
import type { UsageEvent } from '../../src/metering/event.js';
import type { CallStart } from '../../src/metering/types.js';
import { Pricer } from '../../src/pricing/index.js';
import type { ProviderSlug } from '../../src/providers/types.js';

export interface Fixture {
  slug: ProviderSlug;
  file: string;
  kind: 'json' | 'sse' | 'ndjson';
  bytes: Buffer;
  expected: {
    request: { path: string; body: unknown };
    model?: string;
    usage: Record<string, number | string> | null;
    error?: boolean;
    incomplete?: boolean;
    text?: string;
  };
}

const dir = join(packageRoot, 'test/fixtures/providers');

/** The providers' fixtures: a body (`.json`, `.sse`, `.ndjson`) and its `.expected.json`. */
export function loadFixtures(): Fixture[] {
  const out: Fixture[] = [];
  for (const slug of readdirSync(dir).sort() as ProviderSlug[]) {
    for (const file of readdirSync(join(dir, slug)).sort()) {
      const m = /^(.*)\.(json|sse|ndjson)$/.exec(file);
      if (!m || file.endsWith('.expected.json')) continue;
      const expected = JSON.parse(
        readFileSync(join(dir, slug, `${m[1]}.expected.json`), 'utf8'),
      ) as Fixture['expected'];
      out.push({ slug, file, kind: m[2] as Fixture['kind'], bytes: readFileSync(join(dir, slug, file)), expected });
    }
  }
  return out;
}

/** HTTP status of a fixture: `error-401.json` → 401, anything else 200. */
export function statusOf(f: Fixture): number {
  const m = /error-(\d{3})/.exec(f.file);
  return m ? Number(m[1]) : 200;
}

export const contentTypes = {
  json: 'application/json',
  sse: 'text/event-stream; charset=utf-8',
  ndjson: 'application/stream+json',
};

/** Splits bytes into reads of random sizes (seeded, so a failure can be replayed). */
export function randomChunks(bytes: Buffer, seed: number, maxChunk = 64): Buffer[] {
  let s = seed >>> 0 || 1;
  const rand = () => (s = (s * 1103515245 + 12345) >>> 0) / 2 ** 32;
  const out: Buffer[] = [];
  for (let i = 0; i < bytes.length;) {
    const n = 1 + Math.floor(rand() * maxChunk);
    out.push(bytes.subarray(i, i + n));
    i += n;
  }
  return out;
}

export const pricer = new Pricer();

export function callStart(
  slug: ProviderSlug,
  path: string,
  tags: Record<string, string> = { team: 'search' },
): CallStart {
  const time = new Date();
  return {
    id: uuidv7(time.getTime()),
    time,
    startedAt: performance.now(),
    principal: {
      keyId: 'a1b2c3d4e5f6',
      accountId: '0190a8e0-0000-7000-8000-00000000000a',
      accountName: 'acme',
      plan: 'pro',
    },
    provider: slug,
    path,
    tags,
  };
}

export interface MeterRun {
  slug: ProviderSlug;
  path: string;
  requestBody?: unknown;
  status?: number;
  headers?: Record<string, string>;
  chunks?: Buffer[];
  /** false: the client left (or the upstream broke) after these chunks. */
  completed?: boolean;
  /** Status given to end() (the proxy's own 502/504 when there was no response). */
  endStatus?: number;
  /** No response head at all (the upstream could not be reached). */
  noHead?: boolean;
  /** The client left after the request was forwarded (the proxy read on). */
  clientLeft?: boolean;
  tags?: Record<string, string>;
  /** The request's HTTP method (default: unset, as for a POST). */
  method?: string;
}

/** Runs one call through a fresh MeteringService and resolves with its one event. */
export async function meter(
  run: MeterRun,
): Promise<{ event: UsageEvent; events: UsageEvent[]; service: MeteringService }> {
  const events: UsageEvent[] = [];
  let delivered!: () => void;
  const done = new Promise<void>((resolve) => (delivered = resolve));
  const sink = {
    push: (e: UsageEvent) => {
      events.push(e);
      delivered();
    },
  };
  const m = new MeteringService({ pricer, sink, logger: { warn() {}, error() {} } });
  const call = m.begin({ ...callStart(run.slug, run.path, run.tags), ...(run.method ? { method: run.method } : {}) });
  call.requestBody(run.requestBody === undefined ? undefined : Buffer.from(JSON.stringify(run.requestBody)));
  if (!run.noHead) call.responseHead(run.status ?? 200, { 'content-type': 'application/json', ...run.headers });
  for (const c of run.chunks ?? []) call.responseChunk(c);
  call.end({
    ...(run.endStatus === undefined
      ? { completed: run.completed ?? true }
      : { completed: run.completed ?? false, status: run.endStatus }),
    ...(run.clientLeft ? { clientLeft: true } : {}),
  });
  await Promise.race([
    done,
    new Promise((_, reject) => setTimeout(() => reject(new Error('no event within 5 s')), 5000)),
  ]);
  return { event: events[0]!, events, service: m };
}
