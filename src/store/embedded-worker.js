// Runs PGlite off the main thread: in-process it stalls the daemon's event loop (DESIGN.md).
// Plain JavaScript so that it starts the same from src/ (tsx, vitest) and from dist/.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { parentPort, workerData } from 'node:worker_threads';
import { PGlite } from '@electric-sql/pglite';

// PostgreSQL's WebAssembly runs on V8's baseline compiler only (set before PGlite compiles it):
// the optimising tier recompiles its hot functions in the background, which costs about 40 MB
// of memory and a second of CPU at start, and measured no faster per call under load. V8 flags
// are per process: the only other WebAssembly in the daemon is undici's HTTP parser, which
// measured the same either way.
setFlagsFromString('--liftoff-only');

// A parameter given as bytes is text in UTF-8 (the writer's batches of JSON): decoded here, off
// the daemon's thread. The store's SQL takes bytea only as hex text (decode($n, 'hex')).
const decoder = new TextDecoder();
const text = (param) => (param instanceof Uint8Array ? decoder.decode(param) : param);

// INT8, NUMERIC and DATE stay strings, as in the pg back-end (see TEXT_PARSED_OIDS in types.ts).
const asIs = (value) => value;
const parsers = { 20: asIs, 1700: asIs, 1082: asIs };

// Small buffers: PGlite's defaults (shared_buffers 128 MB, wal_buffers 4 MB…) are what its
// memory grows to under a steady write load; the operating system's page cache still serves
// reads. PGlite's own start parameters come first (startParams replaces them).
const startParams = [
  ...PGlite.defaultStartParams,
  '-c', 'shared_buffers=16MB', '-c', 'wal_buffers=1MB', '-c', 'temp_buffers=1MB',
];

// A store without a database yet starts from the pre-built template (embedded-template.ts).
const { dataDir, template } = workerData;
const fresh = template && !(dataDir && existsSync(join(dataDir, 'PG_VERSION')));
const ready = PGlite.create({
  ...(dataDir ? { dataDir } : {}),
  ...(fresh ? { loadDataDir: new Blob([readFileSync(template)]) } : {}),
  parsers,
  startParams,
});

parentPort.on('message', async (req) => {
  let reply;
  try {
    const db = await ready;
    if (req.op === 'query') reply = { id: req.id, rows: (await db.query(req.sql, req.params?.map(text))).rows };
    else if (req.op === 'exec') {
      await db.exec(req.sql);
      reply = { id: req.id };
    } else {
      await db.close();
      reply = { id: req.id };
    }
  } catch (err) {
    reply = { id: req.id, error: { message: err?.message ?? String(err), code: err?.code } };
  }
  parentPort.postMessage(reply);
});
