import { connect, type Socket } from 'node:net';

export interface RawReply {
  /** 0 when the connection closed without a status line. */
  status: number;
  head: string;
  body: string;
}

/** Sends `bytes` exactly as given on a fresh TCP connection (no client-side normalisation of
 *  the path, headers or framing) and reads until the server closes or `timeoutMs` passes. */
export function rawExchange(url: string, bytes: string | Buffer, timeoutMs = 10_000): Promise<RawReply> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const socket: Socket = connect(Number(port), hostname);
    const chunks: Buffer[] = [];
    const done = () => {
      clearTimeout(timer);
      socket.destroy();
      const text = Buffer.concat(chunks).toString('latin1');
      const at = text.indexOf('\r\n\r\n');
      const head = at < 0 ? text : text.slice(0, at);
      resolve({
        status: Number(/^HTTP\/1\.[01] (\d{3})/.exec(head)?.[1] ?? 0),
        head,
        body: at < 0 ? '' : text.slice(at + 4),
      });
    };
    const timer = setTimeout(done, timeoutMs);
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('close', done);
    socket.on('error', () => {});
    socket.write(bytes);
  });
}

/** A request head (Connection: close) with the given request target and header lines. */
export function head(method: string, target: string, host: string, lines: string[] = [], body = ''): string {
  return `${method} ${target} HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n${lines.map((l) => `${l}\r\n`).join('')}\r\n${body}`;
}
