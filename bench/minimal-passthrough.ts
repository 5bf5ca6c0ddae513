/**
 * The floor to compare against: the smallest Node + undici pass-through (no auth, no header
 * rules, no metering), in its own process like the daemon. Prints `meter listening on URL`.
 * Upstream origin from METER_UPSTREAM_OPENAI; `/proxy/openai/x` → `/v1/x`.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Pool } from 'undici';

const upstream = new URL(process.env.METER_UPSTREAM_OPENAI!);
const pool = new Pool(upstream.origin);
const server = createServer((req, res) => {
  pool
    .stream(
      {
        path: `${upstream.pathname}/${req.url!.slice('/proxy/openai/'.length)}`,
        method: req.method!,
        headers: { 'content-type': 'application/json' },
        body: req,
      },
      ({ statusCode, headers }) => {
        delete headers.connection;
        delete headers['transfer-encoding'];
        res.writeHead(statusCode, headers as Record<string, string>);
        return res;
      },
    )
    .catch(() => res.destroy());
});
// As the daemon's: Node's default (5 s) closes the bench's idle connections between phases, and
// a call sent just as one closes fails the run with "other side closed".
server.keepAliveTimeout = 65_000;
server.listen(0, '127.0.0.1', () =>
  process.stdout.write(`meter listening on http://127.0.0.1:${(server.address() as AddressInfo).port}\n`),
);
process.once('SIGTERM', () => process.exit(0));
