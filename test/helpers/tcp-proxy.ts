import { connect, createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';

/**
 * A TCP relay on 127.0.0.1 in front of a real server, that a test can take down (connections
 * cut, new ones refused) and bring back on the same port: a database that goes away and
 * returns, without touching the database itself.
 */
export interface TcpProxy {
  port: number;
  /** `url` with its host and port replaced by the relay's. */
  urlFor(url: string): string;
  down(): Promise<void>;
  up(): Promise<void>;
  close(): Promise<void>;
}

export async function startTcpProxy(targetUrl: string): Promise<TcpProxy> {
  const target = new URL(targetUrl);
  const targetPort = Number(target.port || 5432);
  const sockets = new Set<Socket>();
  let server: Server | undefined;
  let port = 0;

  const listen = () => new Promise<void>((resolve, reject) => {
    const s = createServer((client) => {
      const upstream = connect(targetPort, target.hostname);
      sockets.add(client).add(upstream);
      const cut = () => {
        client.destroy();
        upstream.destroy();
        sockets.delete(client);
        sockets.delete(upstream);
      };
      for (const sock of [client, upstream]) {
        sock.on('error', cut);
        sock.on('close', cut);
      }
      client.pipe(upstream);
      upstream.pipe(client);
    });
    s.once('error', reject);
    s.listen(port, '127.0.0.1', () => {
      port = (s.address() as AddressInfo).port;
      server = s;
      resolve();
    });
  });

  const down = async () => {
    const s = server;
    server = undefined;
    for (const sock of sockets) sock.destroy();
    sockets.clear();
    if (s) await new Promise<void>((resolve) => s.close(() => resolve()));
  };

  await listen();
  return {
    get port() {
      return port;
    },
    urlFor(url: string) {
      const u = new URL(url);
      u.hostname = '127.0.0.1';
      u.port = String(port);
      return u.toString();
    },
    down,
    up: () => (server ? Promise.resolve() : listen()),
    close: down,
  };
}
