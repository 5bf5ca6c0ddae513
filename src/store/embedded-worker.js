// Runs PGlite off the main thread: in-process it stalls the daemon's event loop (DESIGN.md).
// Plain JavaScript so that it starts the same from src/ (tsx, vitest) and from dist/.
import { parentPort, workerData } from 'node:worker_threads';
import { PGlite } from '@electric-sql/pglite';

// INT8, NUMERIC and DATE stay strings, as in the pg back-end (see TEXT_PARSED_OIDS in types.ts).
const text = (value) => value;
const parsers = { 20: text, 1700: text, 1082: text };

const { dataDir } = workerData;
const ready = PGlite.create(dataDir ? { dataDir, parsers } : { parsers });

parentPort.on('message', async (req) => {
  let reply;
  try {
    const db = await ready;
    if (req.op === 'query') reply = { id: req.id, rows: (await db.query(req.sql, req.params)).rows };
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
