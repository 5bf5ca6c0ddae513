/**
 * The price table in force: the catalogue bundled with @pydantic/genai-prices, or a newer copy of
 * its published data file (a JSON array of providers, REMOTE_DATA_JSON_URL) fetched by
 * METER_PRICES_REMOTE or `meter pricing update`. A copy is validated before it is used, the last
 * good one is kept in METER_DATA_DIR, and genai-prices' own `updatePrices` hook makes it the data
 * its model matching reads. Cost arithmetic never uses the catalogue's floats (see cost.ts).
 */
import { MeterError } from '../errors.js';
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Dispatcher } from 'undici';
import { z } from 'zod';
import {
  REMOTE_DATA_JSON_URL,
  updatePrices,
  waitForUpdate,
  type ModelInfo,
  type Provider,
  type ProviderDataPayload,
} from '@pydantic/genai-prices';
import { catalogueVersion, CATALOGUE_PROVIDER_ID, compileCatalogueModelStrict } from './catalogue.js';
import { maskUrl } from '../config.js';
import { privateDir } from '../store/private-files.js';
import { PROVIDER_SLUGS } from '../providers/index.js';

export { REMOTE_DATA_JSON_URL };

export interface PriceTableInfo {
  /** Names the table in every event's price_version: `genai-prices@0.1.8` (bundled) or
   *  `genai-prices-data@<first 12 hex digits of the file's SHA-256>`. */
  version: string;
  origin: 'bundled' | 'downloaded';
  /** Where a downloaded table came from (URL or file) and when it was fetched. */
  source?: string;
  fetchedAt?: string;
  /** Models of the nine providers in the table. */
  models: number;
}

/** A price data file that cannot be used; the message says why. */
export class PriceDataError extends MeterError {
  override name = 'PriceDataError';
}

// ---- the table in force (process-wide, as genai-prices' data is) ----

let setProviderData: ((data: ProviderDataPayload) => void) | undefined;
updatePrices(({ setProviderData: set }) => {
  setProviderData = set;
});
/** The bundled providers, captured before anything replaces them. */
const bundled: Promise<Provider[] | null> = waitForUpdate();

let active: PriceTableInfo | undefined;
let generation = 0;

function bundledInfo(): PriceTableInfo {
  return { version: catalogueVersion(), origin: 'bundled', models: 0 };
}

/** The table in force. */
export function activePriceTable(): PriceTableInfo {
  return (active ??= bundledInfo());
}

/** Changes whenever another table is put in force (pricers drop their caches). */
export function priceTableGeneration(): number {
  return generation;
}

export interface ParsedPriceData {
  info: PriceTableInfo;
  providers: Provider[];
  /** The file's text, as saved. */
  text: string;
}

/** Puts a validated table in force. */
export function activatePriceData(data: ParsedPriceData): void {
  if (!setProviderData) throw new Error('genai-prices did not hand over its data setter');
  setProviderData(data.providers);
  active = data.info;
  generation++;
}

/** Back to the bundled catalogue. */
export async function activateBundled(): Promise<void> {
  const providers = await bundled;
  if (providers && setProviderData) setProviderData(providers);
  active = bundledInfo();
  generation++;
}

// ---- validation ----

const MAX_BYTES = 64 << 20;

const modelSchema = z
  .object({
    id: z.string().min(1),
    match: z.record(z.string(), z.unknown()),
    prices: z.union([z.record(z.string(), z.unknown()), z.array(z.record(z.string(), z.unknown())).min(1)]),
  })
  .loose();

const providerSchema = z
  .object({
    id: z.string().min(1),
    name: z.string(),
    api_pattern: z.string(),
    models: z.array(modelSchema),
  })
  .loose();

/**
 * Parses and checks a price data file: a JSON array of providers in genai-prices' shape, with
 * each of our nine providers present and every one of their models' prices valid exact
 * decimals (a single bad price rejects the file: half a table is worse than an old one).
 */
export function parsePriceData(text: string, meta: { source: string; fetchedAt: string }): ParsedPriceData {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new PriceDataError(`not valid JSON (${(err as Error).message})`);
  }
  if (!Array.isArray(raw)) throw new PriceDataError('expected a JSON array of providers (genai-prices data format)');
  const result = z.array(providerSchema).safeParse(raw);
  if (!result.success) {
    const issue = result.error.issues[0]!;
    throw new PriceDataError(`not in genai-prices data format: at [${issue.path.join('.')}] ${issue.message}`);
  }
  const providers = raw as Provider[];
  let models = 0;
  for (const slug of PROVIDER_SLUGS) {
    const id = CATALOGUE_PROVIDER_ID[slug];
    const p = providers.find((x) => x.id === id);
    if (!p) throw new PriceDataError(`provider "${id}" (${slug}) is missing`);
    if (p.models.length === 0) throw new PriceDataError(`provider "${id}" (${slug}) has no models`);
    for (const m of p.models) {
      try {
        compileCatalogueModelStrict(m as ModelInfo);
      } catch (err) {
        throw new PriceDataError(`provider "${id}" model "${m.id}": ${(err as Error).message}`);
      }
    }
    models += p.models.length;
  }
  const hash = createHash('sha256').update(text).digest('hex').slice(0, 12);
  return {
    info: {
      version: `genai-prices-data@${hash}`,
      origin: 'downloaded',
      source: meta.source,
      fetchedAt: meta.fetchedAt,
      models,
    },
    providers,
    text,
  };
}

// ---- fetching ----

export interface FetchOptions {
  /** Longest wait for the answer and for each part of its body. */
  timeoutMs?: number;
  maxBytes?: number;
}

/** The text of a price data file from an http(s) URL, a file: URL or a path. */
export async function readPriceSource(source: string, opts: FetchOptions = {}): Promise<string> {
  const maxBytes = opts.maxBytes ?? MAX_BYTES;
  if (/^https?:\/\//i.test(source)) {
    const timeout = opts.timeoutMs ?? 30_000;
    let res;
    try {
      // undici's full API is loaded only to fetch prices (the daemon's proxy loads its Pool alone).
      const { request } = await import('undici');
      res = await request(source, { headersTimeout: timeout, bodyTimeout: timeout, dispatcher: await redirecting() });
    } catch (err) {
      throw new PriceDataError(`cannot fetch it (${describeError(err)})`);
    }
    if (res.statusCode !== 200) {
      await res.body.dump().catch(() => {});
      throw new PriceDataError(`the server answered HTTP ${res.statusCode}`);
    }
    const chunks: Buffer[] = [];
    let size = 0;
    try {
      for await (const chunk of res.body) {
        size += (chunk as Buffer).length;
        if (size > maxBytes) {
          res.body.destroy();
          throw new PriceDataError(`larger than ${maxBytes} bytes`);
        }
        chunks.push(chunk as Buffer);
      }
    } catch (err) {
      if (err instanceof PriceDataError) throw err;
      throw new PriceDataError(`cannot read it (${describeError(err)})`);
    }
    return Buffer.concat(chunks).toString('utf8');
  }
  const path = source.startsWith('file:') ? fileURLToPath(source) : source;
  try {
    if (statSync(path).size > maxBytes) throw new PriceDataError(`larger than ${maxBytes} bytes`);
    return readFileSync(path, 'utf8');
  } catch (err) {
    if (err instanceof PriceDataError) throw err;
    throw new PriceDataError(`cannot read it (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
  }
}

let agent: Dispatcher | undefined;
/** The published file is on a CDN that may redirect. */
async function redirecting(): Promise<Dispatcher> {
  const { Agent, interceptors } = await import('undici');
  return (agent ??= new Agent().compose(interceptors.redirect({ maxRedirections: 3 })));
}

function describeError(err: unknown): string {
  const e = err as { code?: string; message?: string; name?: string };
  if (
    e?.name === 'HeadersTimeoutError' ||
    e?.name === 'BodyTimeoutError' ||
    e?.code?.startsWith('UND_ERR_HEADERS_TIMEOUT') ||
    e?.code === 'UND_ERR_BODY_TIMEOUT'
  )
    return 'timed out';
  return e?.code ?? e?.message ?? String(err);
}

/** Fetches and validates a price data file. */
export async function fetchPriceData(source: string, opts: FetchOptions = {}): Promise<ParsedPriceData> {
  const text = await readPriceSource(source, opts);
  // The source is saved beside the data, logged and shown: never with the URL's credentials.
  const shown = /^https?:\/\//i.test(source) ? maskUrl(source) : source;
  return parsePriceData(text, { source: shown, fetchedAt: new Date().toISOString() });
}

// ---- the last good copy in METER_DATA_DIR ----

export const priceDataFile = (dataDir: string) => join(dataDir, 'prices', 'price-data.json');
const metaFile = (dataDir: string) => join(dataDir, 'prices', 'price-data.meta.json');

/** Saves a validated table as the last good copy (atomically: a reader never sees half a file). */
export function savePriceData(dataDir: string, data: ParsedPriceData): void {
  privateDir(dataDir);
  mkdirSync(join(dataDir, 'prices'), { recursive: true, mode: 0o700 });
  const write = (file: string, text: string) => {
    const tmp = `${file}.${process.pid}.tmp`;
    writeFileSync(tmp, text, { mode: 0o600 });
    renameSync(tmp, file);
  };
  write(metaFile(dataDir), JSON.stringify({ source: data.info.source, fetched_at: data.info.fetchedAt }) + '\n');
  write(priceDataFile(dataDir), data.text);
}

/** Removes the saved copy: the bundled catalogue is used again. */
export function removeSavedPriceData(dataDir: string): boolean {
  let removed = false;
  for (const f of [priceDataFile(dataDir), metaFile(dataDir)]) {
    try {
      statSync(f);
      rmSync(f);
      removed = true;
    } catch {
      // not there
    }
  }
  return removed;
}

/** The saved copy's modification time, or undefined when there is none. */
export function savedPriceDataMtime(dataDir: string): number | undefined {
  try {
    return statSync(priceDataFile(dataDir)).mtimeMs;
  } catch {
    return undefined;
  }
}

/** The last good copy, validated again (a file edited by hand is not trusted); undefined when
 *  there is none. Throws PriceDataError when it exists but cannot be used. */
export function loadSavedPriceData(dataDir: string): ParsedPriceData | undefined {
  if (savedPriceDataMtime(dataDir) === undefined) return undefined;
  const text = readPriceSourceSync(priceDataFile(dataDir));
  let meta: { source?: string; fetched_at?: string } = {};
  try {
    meta = JSON.parse(readFileSync(metaFile(dataDir), 'utf8')) as typeof meta;
  } catch {
    // the data alone is enough
  }
  return parsePriceData(text, {
    source: meta.source ?? priceDataFile(dataDir),
    fetchedAt: meta.fetched_at ?? new Date(savedPriceDataMtime(dataDir)!).toISOString(),
  });
}

function readPriceSourceSync(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    throw new PriceDataError(`cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
  }
}
