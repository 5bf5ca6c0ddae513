import { closeSync, fsyncSync, mkdirSync, openSync, readdirSync, readFileSync, truncateSync, unlinkSync, writeSync } from 'node:fs';
import { appendFile, open, readFile, unlink, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { acquireLock, StoreLockedError } from './lockfile.js';

/**
 * The local append-only spool between the hot path and the database: every event becomes one
 * JSON line in a segment file (`seg-<seq>.jsonl`) before it may be shipped, and a segment is
 * deleted once every one of its events is acknowledged as written.
 *
 * `push` is synchronous and O(1): it only buffers the line (and keeps the event in memory for
 * shipping while the in-memory queue has room). `flush` writes buffered lines and fsyncs them.
 * When the queue is full (database down, backlog) new events are not kept in memory: a cursor
 * marks the first event that is only on disk, and `refill` reads events back from the segments
 * as the queue drains. The queue is in spool order at all times, so a position (segment, index)
 * says exactly which events are queued, which are only on disk and which are durable.
 */

export interface SpoolOptions {
  dir: string;
  /** Events kept in memory for shipping; beyond this they are read back from disk. */
  maxQueued?: number;
  /** Events per segment file before a new one is started. */
  segmentMaxEvents?: number;
  /** Buffered, not yet written bytes that make `wantsFlush` true. */
  flushBytes?: number;
}

export interface Segment {
  readonly seq: number;
  readonly path: string;
  /** Lines appended (positions handed out). */
  count: number;
  /** Lines written and fsynced. */
  durable: number;
  /** Bytes written and fsynced: a failed write is cut back to here. */
  bytes: number;
  acked: number;
  sealed: boolean;
  fh?: FileHandle;
}

/** A queued event as its spool line (JSON, no newline): shipped as it is, parsed only when
 *  an event itself is needed (dead letters, the lag of the oldest). */
export interface Queued {
  line: string;
  seg: Segment;
  idx: number;
}

export interface SpoolStats {
  /** Events in memory, ready to ship once durable. */
  queued: number;
  /** Events not yet acknowledged, in memory or on disk. */
  backlog: number;
  /** true while some events are only on disk. */
  spilling: boolean;
  segments: number;
  /** Events pushed but not yet written to disk. */
  buffered: number;
}

/** The flush buffer's first size, and the size beyond which it is not kept between flushes. */
const OUT_START = 64 * 1024;
const MAX_KEPT_OUT = 8 << 20;
const SEGMENT_RE = /^seg-(\d{12})\.jsonl$/;
const DEAD_LETTER_FILE = 'dead-letter.jsonl';

export class Spool<T> {
  readonly dir: string;
  readonly deadLetterPath: string;
  private readonly maxQueued: number;
  private readonly segmentMaxEvents: number;
  private readonly flushBytes: number;
  private segments: Segment[] = [];
  private active!: Segment;
  private pending: { seg: Segment; lines: string[] }[] = [];
  private pendingBytes = 0;
  private queue: Queued[] = [];
  private head = 0;
  /** First event that is on disk only (spill mode), null when every event is queued. */
  private cursor: { seg: Segment; idx: number } | null = null;
  private flushChain: Promise<void> = Promise.resolve();
  private opened = false;
  private closed = false;
  private lock: { release(): void } | undefined;
  /** What a flush writes, encoded (flushes are serialised, so one buffer serves them all). */
  private out = Buffer.allocUnsafe(OUT_START);

  constructor(opts: SpoolOptions) {
    this.dir = opts.dir;
    this.deadLetterPath = join(opts.dir, DEAD_LETTER_FILE);
    this.maxQueued = opts.maxQueued ?? 20_000;
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
      throw new Error(`the spool in ${this.dir} is in use by process ${err.owner.pid} (another meter daemon with the same METER_DATA_DIR); give each daemon its own METER_DATA_DIR`);
    }
    let recovered = 0;
    let truncatedTails = 0;
    const files = readdirSync(this.dir).filter((f) => SEGMENT_RE.test(f)).sort();
    let lastSeq = 0;
    for (const file of files) {
      const seq = Number(SEGMENT_RE.exec(file)![1]);
      lastSeq = Math.max(lastSeq, seq);
      const path = join(this.dir, file);
      const buf = readFileSync(path);
      const end = buf.lastIndexOf(0x0a) + 1;
      if (end < buf.length) {
        truncateSync(path, end);
        truncatedTails++;
      }
      let count = 0;
      for (let i = buf.indexOf(0x0a); i >= 0 && i < end; i = buf.indexOf(0x0a, i + 1)) count++;
      if (count === 0) {
        unlinkSync(path);
        continue;
      }
      this.segments.push({ seq, path, count, durable: count, bytes: end, acked: 0, sealed: true });
      recovered += count;
    }
    this.active = this.newSegment(lastSeq + 1);
    if (recovered > 0) this.cursor = { seg: this.segments[0]!, idx: 0 };
    this.opened = true;
    return { recovered, truncatedTails };
  }

  /** Buffers one event for the spool; never blocks, never throws for a serialisable event. */
  push(item: T): void {
    const json = JSON.stringify(item);
    const line = json + '\n';
    if (this.closed || !this.opened) return this.appendNow(line);
    let seg = this.active;
    if (seg.count >= this.segmentMaxEvents) seg = this.rotate();
    const idx = seg.count++;
    const last = this.pending[this.pending.length - 1];
    if (last?.seg === seg) last.lines.push(line);
    else this.pending.push({ seg, lines: [line] });
    this.pendingBytes += line.length;
    if (this.cursor !== null) return;
    if (this.queue.length - this.head < this.maxQueued) this.queue.push({ line: json, seg, idx });
    else this.cursor = { seg, idx }; // full: this event and the ones after it wait on disk
  }

  /** Events in memory waiting to be shipped. */
  get queued(): number {
    return this.queue.length - this.head;
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

  /** One pass over what is buffered when it starts: lines pushed meanwhile wait for the next
   *  flush (under a steady stream of pushes a flush that wrote until nothing was left would
   *  hardly ever end, and the writer, which ships only durable events, would wait on it). */
  private async writePending(): Promise<void> {
    for (let entries = this.pending.length; entries > 0 && this.pending.length > 0; entries--) {
      const entry = this.pending[0]!;
      const seg = entry.seg;
      // Lines pushed while this write is under way join the same entry: write what is here now.
      const n = entry.lines.length;
      const bytes = this.encode(entry.lines, n);
      try {
        if (!seg.fh) {
          seg.fh = await open(seg.path, 'a');
          await this.syncDir(); // the new file's name must survive a crash too
        }
        for (let at = 0; at < bytes; ) at += (await seg.fh.write(this.out, at, bytes - at)).bytesWritten;
        await seg.fh.datasync();
      } catch (err) {
        // Cut a partial write back so that the retried lines are not written twice.
        await seg.fh?.truncate(seg.bytes).catch(() => {});
        throw err;
      } finally {
        if (this.out.length > MAX_KEPT_OUT) this.out = Buffer.allocUnsafe(OUT_START);
      }
      for (let i = 0; i < n; i++) this.pendingBytes -= entry.lines[i]!.length;
      entry.lines.splice(0, n);
      if (entry.lines.length === 0) this.pending.shift();
      else entries = 1; // the active segment got more lines while this was written: they wait
      seg.bytes += bytes;
      seg.durable += n;
      if (seg.sealed && seg.durable === seg.count) {
        await this.closeFile(seg);
        await this.deleteIfDone(seg);
      }
    }
  }

  /** The first `n` lines as UTF-8 in `out`, grown as needed; returns the byte count. Lines are
   *  encoded into one reused buffer rather than joined: a flush is up to a few MB, and a joined
   *  string would be one more large object a minor GC cannot free. */
  private encode(lines: string[], n: number): number {
    let at = 0;
    for (let i = 0; i < n; i++) {
      const line = lines[i]!;
      // 3 bytes per UTF-16 unit at most (a surrogate pair, 2 units, is 4 bytes).
      if (this.out.length - at < line.length * 3) {
        const grown = Buffer.allocUnsafe(Math.max(this.out.length * 2, at + line.length * 3));
        this.out.copy(grown, 0, 0, at);
        this.out = grown;
      }
      at += this.out.write(line, at);
    }
    return at;
  }

  /** Reads events that wait on disk back into the queue while it has room. */
  async refill(): Promise<void> {
    const low = Math.max(1, this.maxQueued >> 1);
    while (this.cursor !== null) {
      const { seg, idx } = this.cursor;
      // Past a segment's end is checked before room in the queue: once everything on disk is
      // queued, spilling ends at once, not at some later refill.
      if (idx >= seg.count) {
        if (seg !== this.active) {
          this.cursor = { seg: this.segmentAfter(seg), idx: 0 };
          continue;
        }
        this.cursor = null; // caught up: new events are queued directly again
        return;
      }
      if (this.queue.length - this.head >= low) return;
      if (idx >= seg.durable) return; // the rest is still buffered: after the next flush
      const end = Math.min(seg.durable, idx + (this.maxQueued - (this.queue.length - this.head)));
      const lines = (await readFile(seg.path, 'utf8')).split('\n', end).slice(idx, end);
      for (let i = 0; i < end - idx; i++) {
        const line = lines[i];
        // A torn line would make its whole batch unreadable to the database: checked here.
        if (line !== undefined && parses(line)) this.queue.push({ line, seg, idx: idx + i });
        else await this.dropCorrupt(seg, line);
      }
      this.cursor.idx = end;
    }
  }

  /** Up to `max` queued events from the front that are durable (on disk and fsynced). */
  peek(max: number): Queued[] {
    const out: Queued[] = [];
    for (let i = this.head; i < this.queue.length && out.length < max; i++) {
      const q = this.queue[i]!;
      if (q.idx >= q.seg.durable) break;
      out.push(q);
    }
    return out;
  }

  /** The first `n` queued events are written: forget them, delete segments that are done. */
  async ack(n: number): Promise<void> {
    const done = new Set<Segment>();
    for (let i = 0; i < n && this.head < this.queue.length; i++) {
      const q = this.queue[this.head]!;
      this.queue[this.head++] = undefined as never;
      q.seg.acked++;
      done.add(q.seg);
    }
    if (this.head > 1024 && this.head * 2 > this.queue.length) {
      this.queue = this.queue.slice(this.head);
      this.head = 0;
    }
    for (const seg of done) await this.deleteIfDone(seg);
  }

  /** Keeps events the database rejects for their data, with the reason, instead of losing them. */
  async deadLetter(items: T[], reason: string): Promise<void> {
    const at = new Date().toISOString();
    const data = items.map((event) => JSON.stringify({ at, reason, event }) + '\n').join('');
    const fh = await open(this.deadLetterPath, 'a');
    try {
      await fh.appendFile(data);
      await fh.datasync();
    } finally {
      await fh.close();
    }
  }

  stats(): SpoolStats {
    let backlog = 0;
    for (const s of this.segments) backlog += s.count - s.acked;
    let buffered = 0;
    for (const p of this.pending) buffered += p.lines.length;
    return {
      queued: this.queue.length - this.head, backlog, spilling: this.cursor !== null,
      segments: this.segments.length, buffered,
    };
  }

  /** Bytes of the events not yet acknowledged: buffered lines, plus each segment's unacked
   *  share of its written bytes (for /metrics; computed at scrape time, not kept up). */
  backlogBytes(): number {
    let bytes = this.pendingBytes;
    for (const s of this.segments) if (s.durable > s.acked) bytes += Math.round((s.bytes * (s.durable - s.acked)) / s.durable);
    return bytes;
  }

  /** The oldest event not yet acknowledged, when it is in memory (it is, unless only disk holds
   *  the backlog: just after a start that found a spool, before the first refill). */
  oldest(): T | undefined {
    const q = this.queue[this.head];
    return q ? (JSON.parse(q.line) as T) : undefined;
  }

  /** Flushes and closes files; segments with unwritten events stay for the next start. */
  async close(): Promise<number> {
    if (this.closed) return this.stats().backlog;
    while (this.pending.length > 0) await this.flush();
    this.closed = true;
    for (const seg of [...this.segments]) {
      await this.closeFile(seg);
      seg.sealed = true;
      await this.deleteIfDone(seg);
    }
    this.lock?.release();
    return this.stats().backlog;
  }

  private newSegment(seq: number): Segment {
    const seg: Segment = {
      seq, path: join(this.dir, `seg-${String(seq).padStart(12, '0')}.jsonl`),
      count: 0, durable: 0, bytes: 0, acked: 0, sealed: false,
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

  private segmentAfter(seg: Segment): Segment {
    const i = this.segments.indexOf(seg);
    return this.segments[i + 1] ?? this.active;
  }

  private async deleteIfDone(seg: Segment): Promise<void> {
    if (!seg.sealed || seg.acked < seg.count || seg.durable < seg.count) return;
    const i = this.segments.indexOf(seg);
    if (i < 0) return;
    this.segments.splice(i, 1);
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

  private async dropCorrupt(seg: Segment, line: string | undefined): Promise<void> {
    // Unreadable (a torn write from a crash): kept beside the dead letters, counted as done.
    await appendFile(this.deadLetterPath, JSON.stringify({ at: new Date().toISOString(), reason: 'unreadable spool line', line: line ?? null }) + '\n');
    seg.acked++;
  }

  private async syncDir(): Promise<void> {
    const dh = await open(this.dir, 'r');
    try {
      await dh.sync();
    } catch {
      // some file systems cannot fsync a directory; the file itself is still synced
    } finally {
      await dh.close();
    }
  }

  /** After close (or before open): the event still must not be lost, so it is written now. */
  private appendNow(line: string): void {
    mkdirSync(this.dir, { recursive: true });
    const last = this.segments.reduce((m, s) => Math.max(m, s.seq), 0);
    const name = `seg-${String(last + 1).padStart(12, '0')}.jsonl`;
    const fd = openSync(join(this.dir, name), 'a');
    try {
      writeSync(fd, line);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
  }
}

function parses(line: string): boolean {
  try {
    JSON.parse(line);
    return true;
  } catch {
    return false;
  }
}
