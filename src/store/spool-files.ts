/**
 * The spool's files (./spool.ts): segments named by sequence (`seg-<seq>.jsonl`, one JSON line an
 * event), what a previous run left in them, the dead-letter file, and the reads and fsyncs that
 * work on whole files rather than on the spool's state.
 */
import {
  closeSync,
  fsyncSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  truncateSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';

export const NEWLINE = 0x0a;
const SEGMENT_RE = /^seg-(\d{12})\.jsonl$/;

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
  /** Where the first line not acknowledged starts. */
  ackedBytes: number;
  sealed: boolean;
  fh?: FileHandle;
}

export const segmentPath = (dir: string, seq: number) => join(dir, `seg-${String(seq).padStart(12, '0')}.jsonl`);

/** The segments a previous run left, oldest first, each cut back to its last whole line (a
 *  line cut short by a crash is dropped; an empty segment is deleted). */
export function recoverSegments(dir: string): {
  segments: Segment[];
  recovered: number;
  truncatedTails: number;
  lastSeq: number;
} {
  const segments: Segment[] = [];
  let recovered = 0;
  let truncatedTails = 0;
  const files = readdirSync(dir)
    .filter((f) => SEGMENT_RE.test(f))
    .sort();
  let lastSeq = 0;
  for (const file of files) {
    const seq = Number(SEGMENT_RE.exec(file)![1]);
    lastSeq = Math.max(lastSeq, seq);
    const path = join(dir, file);
    const buf = readFileSync(path);
    const end = buf.lastIndexOf(NEWLINE) + 1;
    if (end < buf.length) {
      truncateSync(path, end);
      truncatedTails++;
    }
    let count = 0;
    for (let i = buf.indexOf(NEWLINE); i >= 0 && i < end; i = buf.indexOf(NEWLINE, i + 1)) count++;
    if (count === 0) {
      unlinkSync(path);
      continue;
    }
    segments.push({ seq, path, count, durable: count, bytes: end, acked: 0, ackedBytes: 0, sealed: true });
    recovered += count;
  }
  return { segments, recovered, truncatedTails, lastSeq };
}

/** Keeps events the database rejects for their data, with the reason. A line that is not even
 *  JSON (a torn write) is kept as it is. */
export async function appendDeadLetters(path: string, lines: string[], reason: string): Promise<void> {
  const at = new Date().toISOString();
  const data = lines
    .map((line) => {
      const event = parse(line);
      return (
        JSON.stringify(
          event === undefined ? { at, reason: `unreadable spool line (${reason})`, line } : { at, reason, event },
        ) + '\n'
      );
    })
    .join('');
  const fh = await open(path, 'a', 0o600);
  try {
    await fh.appendFile(data);
    await fh.datasync();
  } finally {
    await fh.close();
  }
}

/** A new segment's name in a directory is durable once the directory is fsynced. */
export async function syncDir(dir: string): Promise<void> {
  const dh = await open(dir, 'r');
  try {
    await dh.sync();
  } catch {
    // some file systems cannot fsync a directory; the file itself is still synced
  } finally {
    await dh.close();
  }
}

/** One line written and fsynced at once into a new segment `seq` (the spool is closed). */
export function appendSegmentNow(dir: string, seq: number, line: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const fd = openSync(segmentPath(dir, seq), 'a', 0o600);
  try {
    writeSync(fd, line);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** The line that starts at `position` in a file; undefined when the file is gone. */
export async function firstLine(path: string, position: number): Promise<string | undefined> {
  const fh = await open(path, 'r').catch(() => undefined);
  if (!fh) return undefined;
  try {
    for (let size = 16 * 1024; ; size *= 4) {
      const buf = Buffer.allocUnsafe(size);
      const got = await readFully(fh, buf, 0, size, position);
      const end = buf.subarray(0, got).indexOf(NEWLINE);
      if (end >= 0) return buf.toString('utf8', 0, end);
      if (got < size) return undefined;
    }
  } finally {
    await fh.close();
  }
}

/** Reads `length` bytes at `position` unless the file ends first; returns how many it read. */
export async function readFully(
  fh: FileHandle,
  buf: Buffer,
  offset: number,
  length: number,
  position: number,
): Promise<number> {
  let got = 0;
  while (got < length) {
    const { bytesRead } = await fh.read(buf, offset + got, length - got, position + got);
    if (bytesRead === 0) break;
    got += bytesRead;
  }
  return got;
}

export function parse(line: string): unknown {
  try {
    return JSON.parse(line);
  } catch {
    return undefined;
  }
}
