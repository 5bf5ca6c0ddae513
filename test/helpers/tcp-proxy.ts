import { connect, createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';

/** Which way a chunk is going through the relay. */
export type Direction = 'to-server' | 'to-client';

/** One relayed connection, as a tap sees it: `marks` lets a tap remember what already passed;
 *  `chunks` counts the chunks seen each way, the current one included. */
export interface RelayedConnection {
  readonly id: number;
  readonly marks: Set<string>;
  readonly chunks: Record<Direction, number>;
}

/**
 * Sees every chunk before it is relayed and decides: `forward` it, or `cut` the connection
 * (both sides) so the chunk never arrives — a database whose connection dies at a chosen moment
 * of the protocol (mid-statement, after COMMIT before its reply, during connect).
 */
export type Tap = (direction: Direction, chunk: Buffer, conn: RelayedConnection) => 'forward' | 'cut';

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
  /** Sets (or with undefined removes) the tap that may cut connections chunk by chunk. */
  tap(tap: Tap | undefined): void;
  /** Connections cut by the tap so far. */
  readonly cuts: number;
  close(): Promise<void>;
}

export async function startTcpProxy(targetUrl: string): Promise<TcpProxy> {
  const target = new URL(targetUrl);
  const targetPort = Number(target.port || 5432);
  const sockets = new Set<Socket>();
  let server: Server | undefined;
  let port = 0;
  let tap: Tap | undefined;
  let nextId = 1;
  let cuts = 0;

  const listen = () =>
    new Promise<void>((resolve, reject) => {
      const s = createServer((client) => {
        const upstream = connect(targetPort, target.hostname);
        const conn: RelayedConnection = { id: nextId++, marks: new Set(), chunks: { 'to-server': 0, 'to-client': 0 } };
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
        // A hand-made pipe, so the tap sees each chunk before the other side does.
        const relay = (from: Socket, to: Socket, direction: Direction) => {
          from.on('data', (chunk: Buffer) => {
            conn.chunks[direction]++;
            if (tap?.(direction, chunk, conn) === 'cut') {
              cuts++;
              return cut();
            }
            if (!to.write(chunk)) {
              from.pause();
              to.once('drain', () => from.resume());
            }
          });
        };
        relay(client, upstream, 'to-server');
        relay(upstream, client, 'to-client');
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
    tap(t) {
      tap = t;
    },
    get cuts() {
      return cuts;
    },
    close: down,
  };
}

/** Cuts (at most `times` connections) when the reply to a statement containing `marker` comes
 *  back: the server ran it — inside a transaction, not committed — and the client never hears. */
export function cutReplyTo(marker: string, times = Infinity): Tap {
  let left = times;
  return (direction, chunk, conn) => {
    if (direction === 'to-server' && chunk.includes(marker)) conn.marks.add(marker);
    if (direction === 'to-client' && conn.marks.has(marker) && left > 0) {
      left--;
      return 'cut';
    }
    return 'forward';
  };
}

/** ReadyForQuery, idle: the transaction the statements before it ran in is over. */
const READY_IDLE = Buffer.from([0x5a, 0, 0, 0, 5, 0x49]);

/** Cuts (at most `times` connections) once the transaction that ran a statement containing
 *  `marker` committed — an explicit COMMIT, or the end of a one-message script (an implicit
 *  transaction) — before its acknowledgement reaches the client: the server committed, the
 *  client cannot know. */
export function cutAfterCommit(marker: string, times = Infinity): Tap {
  let left = times;
  return (direction, chunk, conn) => {
    if (direction === 'to-server' && chunk.includes(marker)) conn.marks.add(marker);
    if (direction === 'to-client' && conn.marks.has(marker) && chunk.includes(READY_IDLE) && left > 0) {
      left--;
      conn.marks.delete(marker);
      return 'cut';
    }
    return 'forward';
  };
}

/** Cuts (at most `times`) new connections when the server's first answer comes: during connect. */
export function cutConnects(times = Infinity): Tap {
  let left = times;
  return (direction, _chunk, conn) => {
    if (direction === 'to-client' && conn.chunks['to-client'] === 1 && left > 0) {
      left--;
      return 'cut';
    }
    return 'forward';
  };
}
