// The embedded store's real worker, plus a switch to make it die at a chosen moment, as a WASM
// abort or an out-of-memory would: a statement `SELECT 'meter-test: die <when>'` arms it.
//   mid-statement  the next usage_events batch: the worker dies before answering it (not written)
//   after-commit   the next usage_events batch: written, then the worker dies before the reply
//   at-start       also the next worker to start dies while starting (a marker file next to pgdata)
import { existsSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { parentPort, workerData } from 'node:worker_threads';

const marker = workerData.dataDir ? join(dirname(workerData.dataDir), 'die-at-start') : undefined;
if (marker && existsSync(marker)) {
  rmSync(marker);
  process.exit(3);
}
await import('../../src/store/embedded-worker.js');

let armed;
let owed;
const post = parentPort.postMessage.bind(parentPort);
parentPort.postMessage = (reply) => {
  if (reply.id === owed) process.exit(2); // the batch is committed; its reply never leaves
  post(reply);
};
parentPort.on('message', (req) => {
  const m = /meter-test: die ([a-z-]+)/.exec(req.sql ?? '');
  if (m) {
    armed = m[1];
    if (armed === 'at-start' && marker) {
      writeFileSync(marker, '');
      armed = 'mid-statement';
    }
    return;
  }
  if (!armed || !req.sql?.includes('INSERT INTO usage_events')) return;
  if (armed === 'mid-statement') process.exit(1);
  owed = req.id;
  armed = undefined;
});
