/**
 * Incremental framing of a streamed response, fed the raw bytes as they arrive (never delaying
 * them: the proxy pipes the same chunks to the client). Lines are cut on bytes, so a multi-byte
 * UTF-8 character split across reads is decoded whole; CRLF, LF and lone CR all end a line,
 * a CRLF split across reads included. Memory is bounded: an event larger than `maxEventBytes`
 * is dropped (and counted) instead of being buffered.
 */

export type StreamFormat = 'sse' | 'ndjson';

/** Where framed events go; a `StreamAccumulator` is one. */
export interface EventSink {
  onEvent(data: string, event?: string): void;
}

export interface FramerOptions {
  /** Largest event kept, in bytes (SSE: all its lines; NDJSON: the line). Default 1 MiB. */
  maxEventBytes?: number;
}

export const DEFAULT_MAX_EVENT_BYTES = 1 << 20;

/** The stream format of a response's content type, undefined when it is not a stream. */
export function streamFormat(contentType: string | undefined): StreamFormat | undefined {
  if (!contentType) return undefined;
  const semi = contentType.indexOf(';');
  const t = (semi < 0 ? contentType : contentType.slice(0, semi)).trim().toLowerCase();
  if (t === 'text/event-stream') return 'sse';
  if (
    t === 'application/stream+json' ||
    t === 'application/x-ndjson' ||
    t === 'application/jsonl' ||
    t === 'application/x-jsonlines' ||
    t === 'application/jsonlines'
  )
    return 'ndjson';
  return undefined;
}

const LF = 10;
const CR = 13;
const COLON = 0x3a;
const SPACE = 0x20;

export class StreamFramer {
  /** Events dropped for exceeding `maxEventBytes`. */
  dropped = 0;
  private readonly max: number;
  private readonly sse: boolean;
  /** Bytes of the current, not yet terminated line (copied: the caller owns its chunks). */
  private pending: Buffer[] = [];
  private pendingLen = 0;
  /** The previous chunk ended in CR: a leading LF in the next one completes that CRLF. */
  private skipLF = false;
  /** The current line belongs to a dropped event: skip bytes to its end. */
  private discardLine = false;
  private atStart = true;
  // SSE event being built
  private data: string | undefined;
  private eventName: string | undefined;
  private eventBytes = 0;
  private discardEvent = false;

  constructor(
    format: StreamFormat,
    private readonly sink: EventSink,
    opts: FramerOptions = {},
  ) {
    this.sse = format === 'sse';
    this.max = opts.maxEventBytes ?? DEFAULT_MAX_EVENT_BYTES;
  }

  push(chunk: Uint8Array): void {
    const buf = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    const n = buf.length;
    let i = 0;
    if (this.skipLF && n > 0) {
      this.skipLF = false;
      if (buf[0] === LF) i = 1;
    }
    let nextCR = buf.indexOf(CR, i); // most streams have none: then it is never searched again
    while (i < n) {
      const lf = buf.indexOf(LF, i);
      if (nextCR >= 0 && nextCR < i) nextCR = buf.indexOf(CR, i);
      const isCR = nextCR >= 0 && (lf < 0 || nextCR < lf);
      const end = isCR ? nextCR : lf;
      if (end < 0) {
        this.keep(buf, i, n);
        return;
      }
      this.endLine(buf, i, end);
      i = end + 1;
      if (isCR) {
        if (i === n) this.skipLF = true;
        else if (buf[i] === LF) i++;
      }
    }
  }

  /** End of stream: a last line without a line end, and a last SSE event without a blank line. */
  flush(): void {
    if (!this.discardLine && this.pendingLen > 0) this.endLine(Buffer.alloc(0), 0, 0);
    this.discardLine = false;
    this.pending = [];
    this.pendingLen = 0;
    this.skipLF = false;
    if (this.sse) this.dispatch();
  }

  private drop(): void {
    this.dropped++;
    this.pending = [];
    this.pendingLen = 0;
    if (this.sse) {
      this.discardEvent = true;
      this.data = undefined;
    }
  }

  /** An unterminated (so non-empty) tail of a chunk. */
  private keep(buf: Buffer, start: number, end: number): void {
    if (this.discardLine) return;
    if (this.sse && this.discardEvent) {
      this.discardLine = true;
      return;
    }
    const len = end - start;
    if (this.pendingLen + len + this.eventBytes > this.max) {
      this.drop();
      this.discardLine = true;
      return;
    }
    this.pending.push(Buffer.from(buf.subarray(start, end)));
    this.pendingLen += len;
  }

  private endLine(buf: Buffer, start: number, end: number): void {
    if (this.discardLine) {
      this.discardLine = false; // the dropped line is over (an SSE event stays dropped to its end)
      return;
    }
    const len = this.pendingLen + (end - start);
    if (len === 0) {
      if (this.sse) this.dispatch();
      return;
    }
    if (this.sse && this.discardEvent) return;
    if (len + this.eventBytes > this.max) {
      this.drop();
      return;
    }
    let b = buf;
    let s = start;
    let e = end;
    if (this.pendingLen > 0) {
      if (end > start) this.pending.push(buf.subarray(start, end));
      b = this.pending.length === 1 ? this.pending[0]! : Buffer.concat(this.pending, len);
      s = 0;
      e = len;
      this.pending = [];
      this.pendingLen = 0;
    }
    if (this.atStart) {
      this.atStart = false;
      if (b[s] === 0xef && b[s + 1] === 0xbb && b[s + 2] === 0xbf) s += 3; // UTF-8 BOM
    }
    if (this.sse) this.field(b, s, e, len);
    else this.ndjsonLine(b.toString('utf8', s, e));
  }

  /** One SSE field line, located on the bytes: only the value is decoded. */
  private field(b: Buffer, s: number, e: number, len: number): void {
    if (s === e) {
      this.dispatch();
      return;
    }
    if (b[s] === COLON) return; // comment (`: keep-alive`)
    let nameEnd = b.indexOf(COLON, s);
    if (nameEnd < 0 || nameEnd > e) nameEnd = e;
    let v = nameEnd < e ? nameEnd + 1 : e;
    if (v < e && b[v] === SPACE) v++;
    const nameLen = nameEnd - s;
    if (nameLen === 4 && b[s] === 0x64 && b[s + 1] === 0x61 && b[s + 2] === 0x74 && b[s + 3] === 0x61) {
      const value = b.toString('utf8', v, e); // `data`
      this.data = this.data === undefined ? value : `${this.data}\n${value}`;
      this.eventBytes += len;
    } else if (nameLen === 5 && b.toString('latin1', s, nameEnd) === 'event') {
      this.eventName = b.toString('utf8', v, e);
      this.eventBytes += len;
    }
    // `id`, `retry` and unknown fields carry nothing for metering
  }

  private ndjsonLine(line: string): void {
    if (line.charCodeAt(0) <= 0x20 || line.charCodeAt(line.length - 1) <= 0x20) {
      line = line.trim();
      if (line === '') return;
    }
    this.sink.onEvent(line);
  }

  private dispatch(): void {
    if (!this.discardEvent && this.data !== undefined) this.sink.onEvent(this.data, this.eventName);
    this.data = undefined;
    this.eventName = undefined;
    this.eventBytes = 0;
    this.discardEvent = false;
  }
}

/** A framer for a response of this content type, or undefined when it is not a stream. */
export function createFramer(
  contentType: string | undefined,
  sink: EventSink,
  opts?: FramerOptions,
): StreamFramer | undefined {
  const f = streamFormat(contentType);
  return f === undefined ? undefined : new StreamFramer(f, sink, opts);
}
