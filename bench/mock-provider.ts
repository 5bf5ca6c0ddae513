/**
 * The bench's mock provider, in its own process so that serving it does not share the client's
 * event loop: an OpenAI chat completion, or (path ending `/stream`) a stream whose first event
 * leaves at once and the rest on the next turn. Prints `mock listening on URL`.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { CHAT_RESPONSE, STREAM_HEAD, STREAM_TAIL } from './payloads.js';

const server = createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    if (req.url!.endsWith('/stream')) {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      res.write(STREAM_HEAD);
      setImmediate(() => res.end(STREAM_TAIL));
    } else {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(CHAT_RESPONSE) });
      res.end(CHAT_RESPONSE);
    }
  });
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () =>
  process.stdout.write(`mock listening on http://127.0.0.1:${(server.address() as AddressInfo).port}\n`),
);
process.once('SIGTERM', () => process.exit(0));
