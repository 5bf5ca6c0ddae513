import { createBrotliDecompress, createGunzip, createInflate, type Gunzip } from 'node:zlib';

/**
 * The client gets the provider's bytes as they are, compressed when its SDK asked for gzip;
 * metering reads them decompressed, on the side. Identity passes through synchronously; a
 * compressed body goes through a zlib stream, so its last bytes arrive after `end()` is called.
 */
export interface BodyDecoder {
  write(chunk: Buffer): void;
  /** Calls `done` once every decoded byte has been handed out (or decoding failed). */
  end(done: (ok: boolean) => void): void;
}

/** Decoding stops at this many output bytes (METER_MAX_DECODED_BYTES): a decompression bomb
 *  costs neither memory nor CPU; the call is metered as unreadable (estimated). */
export const DEFAULT_MAX_DECODED_BYTES = 64 << 20;

/** Identity has nothing left to hand out at the end. */
const endAtOnce = (done: (ok: boolean) => void): void => done(true);

/** A decoder for a Content-Encoding, or undefined when it cannot be read (e.g. zstd on Node 20). */
export function createDecoder(
  encoding: string | string[] | undefined,
  onData: (chunk: Buffer) => void,
  maxDecodedBytes = DEFAULT_MAX_DECODED_BYTES,
): BodyDecoder | undefined {
  const enc = (Array.isArray(encoding) ? encoding.join(',') : (encoding ?? '')).trim().toLowerCase();
  if (enc === '' || enc === 'identity') {
    return { write: onData, end: endAtOnce };
  }
  let z: Gunzip | ReturnType<typeof createInflate> | ReturnType<typeof createBrotliDecompress>;
  if (enc === 'gzip' || enc === 'x-gzip') z = createGunzip();
  else if (enc === 'deflate') z = createInflate();
  else if (enc === 'br') z = createBrotliDecompress();
  else return undefined;
  let decoded = 0;
  let failed = false;
  let finish: ((ok: boolean) => void) | undefined;
  let finished = false;
  const settle = (ok: boolean) => {
    if (finished || !finish) return;
    finished = true;
    finish(ok);
  };
  z.on('data', (d: Buffer) => {
    if (failed) return;
    decoded += d.length;
    if (decoded <= maxDecodedBytes) return onData(d);
    failed = true;
    z.destroy(); // stop inflating, not only stop handing bytes out
    settle(false);
  });
  z.on('error', () => {
    failed = true;
    settle(false);
  });
  z.on('end', () => settle(!failed));
  return {
    write(chunk) {
      if (!failed) z.write(chunk);
    },
    end(done) {
      finish = done;
      if (failed) return settle(false);
      // A body cut short (client left) never ends cleanly: flush what was decodable and stop.
      z.flush(() => {
        z.end();
        // zlib emits 'error' for a truncated stream, 'end' for a whole one; either settles.
      });
    },
  };
}
