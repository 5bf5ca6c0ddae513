import { open, unlink, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import type { EventRun } from './event-run.js';
import { acquireLock, StoreLockedError } from './lockfile.js';
import {
  appendDeadLetters,
  appendSegmentNow,
  firstLine,
  NEWLINE,
  parse,
  readFully,
  recoverSegments,
  segmentPath,
  syncDir,
  type Segment,
} from './spool-files.js';

/**
 * The local append-only log between the hot path and the database: every event becomes one
 * JSON line in a segment file (`seg-<seq>.jsonl`) before it may be shipped, and a segment is
 * deleted once every one of its events is acknowledged as written.
 *
 * Memory holds only what is not on disk yet. `push` is synchronous: it encodes the event's line
 * into a reused byte chunk, so nothing of the event outlives its call on the V8 heap (lines kept
 * as strings until shipped lived long enough to be promoted, and filled the old generation under
 * load). `flush` appends the chunks to their segment and fsyncs. `read` hands the writer durable
 * events read back from their segment, from the page cache as a rule, as one JSON array in
 * UTF-8: the statement's parameter as it is. A backlog (database down) costs disk, not memory.
 */

export interface SpoolOptions {
  dir: string;
  /** Events per segment file before a new one is started. */
  segmentMaxEvents?: number;
  /** Buffered, not yet written bytes that make `wantsFlush` true. */
  flushBytes?: number;
}

/** The events `read` handed out, and where they end in their segment (for `ack`). */
export interface Batch extends EventRun {
  readonly seg: Segment;
  readonly endIdx: number;
  readonly endByte: number;
}

export interface SpoolStats {
  /** Events not yet acknowledged, in memory or on disk. */
  backlog: number;
  segments: number;
  /** Events pushed but not yet on disk: the only ones held in memory. */
  buffered: number;
}

/** Encoded lines for one segment, not yet written. */
interface Chunk {
  seg: Segment;
  buf: Buffer;
  used: number;
  lines: number;
}

/** Chunks are this size (a larger line gets one of its own), and a few are kept for reuse. */
const CHUNK_BYTES = 128 * 1024;
const KEPT_CHUNKS = 16;
/** A read buffer past this size is not kept for the next read. */
const MAX_KEPT_READ = 8 << 20;
const DEAD_LETTER_FILE = 'dead-letter.jsonl';

export class Spool<T> {
  readonly dir: string;
  readonly deadLetterPath: string;
  private readonly segmentMaxEvents: number;
  private readonly flushBytes: number;
  private segments: Segment[] = [];
  private active!: Segment;
  /** Chunks not yet written, in push order; and those a flush is writing now. */
  private pending: Chunk[] = [];
  private writing: Chunk[] = [];
  private pendingBytes = 0;
  private bufferedLines = 0;
  private unacked = 0;
  private spare: Buffer[] = [];
  private readBuf = Buffer.allocUnsafeSlow(CHUNK_BYTES * 4);
  private reader: { seg: Segment; fh: Promise<FileHandle> } | undefined;
  private flushChain: Promise<void> = Promise.resolve();
  private opened = false;
  private closed = false;
  private lock: { release(): void } | undefined;

  constructor(opts: SpoolOptions) {
    this.dir = opts.dir;
    this.deadLetterPath = join(opts.dir, DEAD_LETTER_FILE);
    this.segmentMaxEvents = opts.segmentMaxEvents ?? 4096;
    this.flushBytes = opts.flushBytes ?? 4 << 20;
  }

  /**
   * Finds the segments a previous run left (killed, or stopped with the database down): their
   * events are replayed (ids make that safe). A line cut short by a crash is dropped from the
   * file. Returns how many events were found.
   */
  open(): { recovered: number; truncatedTails: number } {
    try {
      this.lock = acquireLock(this.dir);
    } catch (err) {
      if (!(err instanceof StoreLockedError)) throw err;
      throw new Error(
        `the spool in ${this.dir} is in use by process ${err.owner.pid} (another meter daemon with the same METER_DATA_DIR); give each daemon its own METER_DATA_DIR`,
      );
    }
    const { segments, recovered, truncatedTails, lastSeq } = recoverSegments(this.dir);
    this.segments = segments;
    this.unacked = recovered;
    this.active = this.newSegment(lastSeq + 1);
    this.opened = true;
    return { recovered, truncatedTails };
  }

  /** Buffers one event for the spool; never blocks, never throws for a serialisable event. */
  push(item: T): void {
    const json = JSON.stringify(item);
    if (this.closed || !this.opened) return this.appendNow(json + '\n');
    let seg = this.active;
    if (seg.count >= this.segmentMaxEvents) seg = this.rotate();
    // 3 bytes per UTF-16 unit at most (a surrogate pair, 2 units, is 4 bytes), and the newline.
    const room = json.length * 3 + 1;
    let chunk = this.pending[this.pending.length - 1];
    if (chunk === undefined || chunk.seg !== seg || chunk.buf.length - chunk.used < room) {
      chunk = { seg, buf: this.chunkBuffer(room), used: 0, lines: 0 };
      this.pending.push(chunk);
    }
    const n = chunk.buf.write(json, chunk.used) + 1;
    chunk.buf[chunk.used + n - 1] = NEWLINE;
    chunk.used += n;
    chunk.lines++;
    seg.count++;
    this.pendingBytes += n;
    this.bufferedLines++;
    this.unacked++;
  }

  /** Events not yet acknowledged (kept as a count: the writer asks on every push). */
  get backlog(): number {
    return this.unacked;
  }

  /** Enough is buffered that the caller should flush now rather than at the next tick. */
  get wantsFlush(): boolean {
    return this.pendingBytes >= this.flushBytes;
  }

  /** Writes and fsyncs every buffered line. Serialised; a failed write keeps the lines buffered. */
  flush(): Promise<void> {
    const run = this.flushChain.then(() => this.writePending());
    this.flushChain = run.catch(() => {});
    return run;
  }

  /** One pass over what is buffered when it starts: lines pushed meanwhile go to new chunks and
   *  wait for the next flush (under a steady stream of pushes a flush that wrote until nothing
   *  was left would hardly ever end, and the writer, which ships only durable events, would
   *  wait on it). A segment's chunks are written, then fsynced once. */
  private async writePending(): Promise<void> {
    this.writing = this.pending;
    this.pending = [];
    try {
      while (this.writing.length > 0) {
        const seg = this.writing[0]!.seg;
        let n = 1;
        while (n < this.writing.length && this.writing[n]!.seg === seg) n++;
        let written = 0;
        try {
          if (!seg.fh) {
            seg.fh = await open(seg.path, 'a', 0o600);
            await syncDir(this.dir); // the new file's name must survive a crash too
          }
          for (let i = 0; i < n; i++) {
            const { buf, used } = this.writing[i]!;
            for (let at = 0; at < used;) at += (await seg.fh.write(buf, at, used - at)).bytesWritten;
            written += used;
          }
          await seg.fh.datasync();
        } catch (err) {
          // Cut a partial write back so that the retried lines are not written twice.
          await seg.fh?.truncate(seg.bytes).catch(() => {});
          throw err;
        }
        let lines = 0;
        for (const chunk of this.writing.splice(0, n)) {
          lines += chunk.lines;
          if (this.spare.length < KEPT_CHUNKS && chunk.buf.length === CHUNK_BYTES) this.spare.push(chunk.buf);
        }
        seg.bytes += written;
        seg.durable += lines;
        this.pendingBytes -= written;
        this.bufferedLines -= lines;
        if (seg.sealed && seg.durable === seg.count) {
          await this.closeFile(seg);
          await this.deleteIfDone(seg);
        }
      }
    } finally {
      // What was not written goes back in front of what was pushed meanwhile, in order.
      if (this.writing.length > 0) this.pending = this.writing.concat(this.pending);
      this.writing = [];
    }
  }

  /**
   * Up to `max` durable events from the front, read back from their segment (a batch never
   * spans two) as one JSON array. The batch's bytes are valid until the next `read`. Undefined
   * when no event is durable yet.
   */
  async read(max: number): Promise<Batch | undefined> {
    const seg = this.front();
    if (!seg || seg.acked >= seg.durable) return undefined;
    const left = seg.bytes - seg.ackedBytes;
    // Enough for `max` lines of this segment's average size, rarely more than a batch needs.
    let want = Math.min(left, Math.ceil((seg.bytes / seg.durable) * max * 1.1) + 4096);
    if (this.readBuf.length > MAX_KEPT_READ && want + 2 <= MAX_KEPT_READ)
      this.readBuf = Buffer.allocUnsafeSlow(MAX_KEPT_READ);
    const fh = await this.readerFor(seg);
    for (;;) {
      if (this.readBuf.length < want + 2)
        this.readBuf = Buffer.allocUnsafeSlow(Math.max(want + 2, this.readBuf.length * 2));
      const buf = this.readBuf;
      // The lines go at 1: the array's `[` is put before them, and each newline becomes its `,`.
      const got = await readFully(fh, buf, 1, want, seg.ackedBytes);
      const lines = buf.subarray(0, got + 1); // what was read, not what an earlier read left after it
      const ends: number[] = [];
      for (let at = lines.indexOf(NEWLINE, 1); at >= 0 && ends.length < max; at = lines.indexOf(NEWLINE, at + 1)) {
        buf[at] = 0x2c;
        ends.push(at);
      }
      if (ends.length === 0) {
        // One line longer than the guess: read more (a durable part always ends with a newline).
        if (want >= left || got < want)
          throw new Error(`spool segment ${seg.path} is shorter than what was written to it`);
        want = Math.min(left, want * 2);
        continue;
      }
      const last = ends[ends.length - 1]!;
      buf[0] = 0x5b;
      buf[last] = 0x5d;
      return {
        json: buf.subarray(0, last + 1),
        count: ends.length,
        ends,
        seg,
        endIdx: seg.acked + ends.length,
        endByte: seg.ackedBytes + last,
      };
    }
  }

  /** The batch `read` gave is written: its segment is deleted once done. */
  async ack(batch: Batch): Promise<void> {
    const seg = batch.seg;
    if (batch.endIdx <= seg.acked) return;
    this.unacked -= batch.endIdx - seg.acked;
    seg.acked = batch.endIdx;
    seg.ackedBytes = batch.endByte;
    await this.deleteIfDone(seg);
  }

  /** Keeps events the database rejects for their data, with the reason, instead of losing
   *  them. A line that is not even JSON (a torn write) is kept as it is. */
  async deadLetter(lines: string[], reason: string): Promise<void> {
    await appendDeadLetters(this.deadLetterPath, lines, reason);
  }

  stats(): SpoolStats {
    return { backlog: this.unacked, segments: this.segments.length, buffered: this.bufferedLines };
  }

  /** Bytes of the events not yet acknowledged: buffered, and written but not acknowledged. */
  backlogBytes(): number {
    let bytes = this.pendingBytes;
    for (const s of this.segments) bytes += s.bytes - s.ackedBytes;
    return bytes;
  }

  /** The oldest event not yet acknowledged (for the writer's lag), from disk or memory. */
  async oldest(): Promise<T | undefined> {
    // Its segment may be acknowledged and deleted while it is read: then the next one is asked.
    for (let attempt = 0; attempt < 3; attempt++) {
      const seg = this.front();
      if (!seg) return undefined;
      if (seg.acked >= seg.durable) {
        const chunk = [...this.writing, ...this.pending].find((c) => c.seg === seg);
        return chunk ? (parse(chunk.buf.toString('utf8', 0, chunk.buf.indexOf(NEWLINE))) as T | undefined) : undefined;
      }
      const line = await firstLine(seg.path, seg.ackedBytes);
      if (line !== undefined) return parse(line) as T | undefined;
    }
    return undefined;
  }

  /** Flushes and closes files; segments with unwritten events stay for the next start. */
  async close(): Promise<number> {
    if (this.closed) return this.unacked;
    do
      await this.flush(); // after the one under way, if any
    while (this.pending.length > 0);
    this.closed = true;
    await this.closeReader();
    for (const seg of [...this.segments]) {
      await this.closeFile(seg);
      seg.sealed = true;
      await this.deleteIfDone(seg);
    }
    this.lock?.release();
    return this.unacked;
  }

  /** The first segment with events not acknowledged. */
  private front(): Segment | undefined {
    for (const seg of this.segments) if (seg.acked < seg.count) return seg;
    return undefined;
  }

  private chunkBuffer(room: number): Buffer {
    if (room > CHUNK_BYTES) return Buffer.allocUnsafeSlow(room);
    return this.spare.pop() ?? Buffer.allocUnsafeSlow(CHUNK_BYTES);
  }

  /** One read handle, on the segment being shipped. */
  private async readerFor(seg: Segment): Promise<FileHandle> {
    if (this.reader?.seg !== seg) {
      await this.closeReader();
      const reader = { seg, fh: open(seg.path, 'r') };
      this.reader = reader;
      reader.fh.catch(() => {
        if (this.reader === reader) this.reader = undefined; // the next read opens it again
      });
    }
    return this.reader!.fh;
  }

  private async closeReader(): Promise<void> {
    const reader = this.reader;
    this.reader = undefined;
    await reader?.fh.then((fh) => fh.close()).catch(() => {});
  }

  private newSegment(seq: number): Segment {
    const seg: Segment = {
      seq,
      path: segmentPath(this.dir, seq),
      count: 0,
      durable: 0,
      bytes: 0,
      acked: 0,
      ackedBytes: 0,
      sealed: false,
    };
    this.segments.push(seg);
    return seg;
  }

  private rotate(): Segment {
    this.active.sealed = true;
    const previous = this.active;
    this.active = this.newSegment(previous.seq + 1);
    // A sealed segment whose lines are all written and acked can go now (else flush or ack does it).
    if (previous.durable === previous.count) void this.deleteIfDone(previous).catch(() => {});
    return this.active;
  }

  private async deleteIfDone(seg: Segment): Promise<void> {
    if (!seg.sealed || seg.acked < seg.count || seg.durable < seg.count) return;
    const i = this.segments.indexOf(seg);
    if (i < 0) return;
    this.segments.splice(i, 1);
    if (this.reader?.seg === seg) await this.closeReader();
    await this.closeFile(seg);
    await unlink(seg.path).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'ENOENT') throw err;
    });
  }

  private async closeFile(seg: Segment): Promise<void> {
    const fh = seg.fh;
    seg.fh = undefined;
    await fh?.close().catch(() => {});
  }

  /** After close (or before open): the event still must not be lost, so it is written now. */
  private appendNow(line: string): void {
    appendSegmentNow(this.dir, this.segments.reduce((m, s) => Math.max(m, s.seq), 0) + 1, line);
  }
}
