// Runs PGlite off the main thread: in-process it stalls the daemon's event loop (DESIGN.md).
// Plain JavaScript so that it starts the same from src/ (tsx, vitest) and from dist/.
import { existsSync, readFileSync, readlinkSync } from 'node:fs';
import { setPriority } from 'node:os';
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
  '-c',
  'shared_buffers=16MB',
  '-c',
  'wal_buffers=1MB',
  '-c',
  'temp_buffers=1MB',
  // PostgreSQL's default, relied on by the quoting of literals below.
  '-c',
  'standard_conforming_strings=on',
];

// The store's work yields the CPU to the proxy's: a batch holds this thread for tens of
// milliseconds, and on a machine whose cores are all busy the calls that arrive meanwhile
// would wait for it (the p99). Linux sets a nice value per thread (by its id, which
// /proc/thread-self names); elsewhere the thread keeps the process's. The writer's spool
// holds whatever waits, and the store catches up when the proxy leaves it a core.
// Only once the database has started: until then no call is proxied, and at nice 10 on a busy
// host the start (the template's load, crash recovery) took five times as long.
// A CLI command that opens the store itself asks not to (yieldCpu false): no proxy runs there.
const WORKER_NICE = 10;
function yieldCpu() {
  try {
    setPriority(Number(readlinkSync('/proc/thread-self').split('/').pop()), WORKER_NICE);
  } catch {
    // no /proc (macOS), or not allowed: the default priority
  }
}

// A store without a database yet starts from the pre-built template (embedded-template.ts).
const { dataDir, template } = workerData;
const fresh = template && !(dataDir && existsSync(join(dataDir, 'PG_VERSION')));
const ready = PGlite.create({
  ...(dataDir ? { dataDir } : {}),
  ...(fresh ? { loadDataDir: new Blob([readFileSync(template)]) } : {}),
  parsers,
  startParams,
});
if (workerData.yieldCpu) ready.then(yieldCpu, () => {});

// PGlite's file system (Emscripten's) throws ErrnoError objects with no message, only a WASI
// errno: named here, with the directory, so that the user sees more than [object Object].
const WASI_ERRNO = {
  2: 'EACCES',
  20: 'EEXIST',
  29: 'EIO',
  31: 'EISDIR',
  44: 'ENOENT',
  51: 'ENOSPC',
  54: 'ENOTDIR',
  55: 'ENOTEMPTY',
  63: 'EPERM',
  69: 'EROFS',
};
const describe = (err) =>
  typeof err?.message === 'string' && err.message
    ? err.message
    : err?.name === 'ErrnoError'
      ? `the embedded store's files in ${dataDir ?? 'memory'} could not be used: ${WASI_ERRNO[err.errno] ?? `errno ${err.errno}`}`
      : String(err);

// A named statement (the writer's batch) is prepared once and run with EXECUTE: parsing and
// planning it cost PGlite more than running it on a small batch. PGlite's API has no named
// statements and EXECUTE takes no bind parameters, so its arguments go as quoted literals
// (standard_conforming_strings is on: only ' needs doubling). One session: the map is this
// worker's, and a worker that restarts prepares again.
const prepared = new Map();
const NAME = /^[a-z_][a-z0-9_]*$/;
const literal = (value) =>
  value === null || value === undefined ? 'NULL' : `'${String(value).replaceAll("'", "''")}'`;
// Values whose text is their literal; anything else (a Date, an array) goes the usual way, and
// so does text with a NUL, which would cut the statement's text short: as a parameter it fails
// as bad data (22021), and the writer isolates the line.
const plain = (value) =>
  value == null ||
  ['number', 'bigint', 'boolean'].includes(typeof value) ||
  (typeof value === 'string' && !value.includes('\0'));

async function query(db, { sql, params, name }) {
  const values = params?.map(text);
  if (!name || !NAME.test(name) || !(values ?? []).every(plain)) return db.query(sql, values);
  if (prepared.get(name) !== sql) {
    if (prepared.has(name)) await db.exec(`DEALLOCATE ${name}`);
    prepared.delete(name);
    await db.exec(`PREPARE ${name} AS ${sql}`);
    prepared.set(name, sql);
  }
  return db.query(`EXECUTE ${name}${values?.length ? `(${values.map(literal).join(', ')})` : ''}`);
}

// A data-changing statement that touched no row (the alert outbox's claim when nothing is due)
// changes nothing a re-read could find (Db.writes). A SELECT over data-modifying CTEs (the
// event batch) reports itself as a SELECT: the daemon counts it as a write.
const DML = new Set(['INSERT', 'UPDATE', 'DELETE', 'MERGE']);
const untouched = (res) => DML.has(res.command) && res.affectedRows === 0;

parentPort.on('message', async (req) => {
  let reply;
  try {
    const db = await ready;
    if (req.op === 'query') {
      const res = await query(db, req);
      reply = { id: req.id, rows: res.rows, ...(untouched(res) ? { unchanged: true } : {}) };
    } else if (req.op === 'exec') {
      await db.exec(req.sql);
      reply = { id: req.id };
    } else {
      await db.close();
      reply = { id: req.id };
    }
  } catch (err) {
    reply = { id: req.id, error: { message: describe(err), code: err?.code } };
  }
  parentPort.postMessage(reply);
});
