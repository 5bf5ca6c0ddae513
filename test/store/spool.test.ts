import { appendFileSync, existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Spool } from '../../src/store/spool.js';
import { tempDir } from '../helpers/stores.js';

interface Item {
  n: number;
}

const segments = (dir: string) => readdirSync(dir).filter((f) => f.startsWith('seg-')).sort();

/** Ships everything like the writer does: flush, refill, peek, ack; returns what was shipped. */
async function drainAll(spool: Spool<Item>, batch = 10, onBatch?: () => void): Promise<number[]> {
  const shipped: number[] = [];
  for (let guard = 0; guard < 100_000; guard++) {
    await spool.flush();
    await spool.refill();
    const got = spool.peek(batch);
    if (got.length === 0) break;
    shipped.push(...got.map((q) => (JSON.parse(q.line) as Item).n));
    onBatch?.();
    await spool.ack(got.length);
  }
  return shipped;
}

describe('Spool', () => {
  it('hands out only durable events, in order, and deletes segments once acknowledged', async () => {
    const dir = tempDir();
    const spool = new Spool<Item>({ dir, segmentMaxEvents: 10 });
    expect(spool.open().recovered).toBe(0);
    for (let n = 0; n < 25; n++) spool.push({ n });
    expect(spool.peek(100)).toHaveLength(0); // nothing is shipped before it is on disk
    await spool.flush();
    expect(segments(dir)).toHaveLength(3);
    expect(readFileSync(join(dir, segments(dir)[0]!), 'utf8').split('\n')[3]).toBe('{"n":3}');
    expect(spool.stats()).toMatchObject({ queued: 25, backlog: 25, spilling: false });
    expect(await drainAll(spool)).toEqual(Array.from({ length: 25 }, (_, n) => n));
    // sealed segments are gone; the active one stays until close
    expect(segments(dir)).toHaveLength(1);
    expect(spool.stats().backlog).toBe(0);
    expect(await spool.close()).toBe(0);
    expect(segments(dir)).toHaveLength(0);
  });

  it('writes multi-byte text exactly, past its first write buffer, and reads it back after a restart', async () => {
    const dir = tempDir();
    const spool = new Spool<{ n: number; s: string }>({ dir, segmentMaxEvents: 100_000 });
    spool.open();
    // 3,000 lines of about 200 UTF-16 units: ASCII, 2-, 3- and 4-byte characters, quotes, escapes.
    const items = Array.from({ length: 3_000 }, (_, n) => ({ n, s: `ü€😀漢 "q" \\ '${n}' `.repeat(8) }));
    for (const item of items) spool.push(item);
    await spool.flush();
    const bytes = items.reduce((sum, item) => sum + Buffer.byteLength(JSON.stringify(item)) + 1, 0);
    expect(bytes).toBeGreaterThan(256 * 1024);
    const [file] = segments(dir);
    expect(readFileSync(join(dir, file!)).length).toBe(bytes);
    // A second flush with more lines appends after the first.
    spool.push({ n: 3_000, s: '末尾' });
    await spool.flush();
    await spool.close();

    const again = new Spool<{ n: number; s: string }>({ dir });
    expect(again.open().recovered).toBe(3_001);
    await again.refill();
    const lines = again.peek(10_000).map((q) => JSON.parse(q.line) as { n: number; s: string });
    expect(lines).toEqual([...items, { n: 3_000, s: '末尾' }]);
    await again.close();
  });

  it('keeps memory bounded under a backlog: the rest waits on disk and comes back exactly once', async () => {
    const dir = tempDir();
    const spool = new Spool<Item>({ dir, maxQueued: 50, segmentMaxEvents: 64 });
    spool.open();
    let maxQueued = 0;
    const total = 5_000;
    for (let n = 0; n < total; n++) {
      spool.push({ n });
      maxQueued = Math.max(maxQueued, spool.queued);
      if (n % 700 === 0) await spool.flush();
    }
    expect(maxQueued).toBe(50);
    expect(spool.stats()).toMatchObject({ spilling: true, backlog: total });
    // events keep arriving while the backlog drains
    let next = total;
    const shipped = await drainAll(spool, 20, () => {
      maxQueued = Math.max(maxQueued, spool.queued);
      for (let i = 0; i < 10 && next < total + 300; i++) spool.push({ n: next++ });
    });
    expect(maxQueued).toBeLessThanOrEqual(50);
    expect(shipped).toEqual(Array.from({ length: total + 300 }, (_, n) => n));
    expect(spool.stats()).toMatchObject({ spilling: false, backlog: 0, queued: 0 });
    await spool.close();
    expect(segments(dir)).toHaveLength(0);
  });

  it('a new run replays what the last one left, and drops a line cut short by a crash', async () => {
    const dir = tempDir();
    const first = new Spool<Item>({ dir, segmentMaxEvents: 8 });
    first.open();
    for (let n = 0; n < 20; n++) first.push({ n });
    await first.flush();
    // the first 8 were written and acknowledged; then the process died (no close)
    expect(first.peek(8)).toHaveLength(8);
    await first.ack(8);
    const last = segments(dir).at(-1)!;
    appendFileSync(join(dir, last), '{"n":9');

    const second = new Spool<Item>({ dir, segmentMaxEvents: 8 });
    expect(second.open()).toEqual({ recovered: 12, truncatedTails: 1 });
    expect(readFileSync(join(dir, last), 'utf8').endsWith('\n')).toBe(true);
    second.push({ n: 100 });
    expect(await drainAll(second)).toEqual([...Array.from({ length: 12 }, (_, i) => i + 8), 100]);
    expect(await second.close()).toBe(0);
    expect(segments(dir)).toHaveLength(0);
  });

  it('an unreadable line goes to the dead-letter file and the rest is replayed', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'seg-000000000007.jsonl'), '{"n":1}\n\u0000\u0000garbage\n{"n":2}\n');
    const spool = new Spool<Item>({ dir });
    expect(spool.open().recovered).toBe(3);
    expect(await drainAll(spool)).toEqual([1, 2]);
    expect(await spool.close()).toBe(0);
    expect(readFileSync(spool.deadLetterPath, 'utf8')).toContain('unreadable spool line');
    expect(segments(dir)).toHaveLength(0);
  });

  it('close keeps unacknowledged events for the next start', async () => {
    const dir = tempDir();
    const spool = new Spool<Item>({ dir });
    spool.open();
    for (let n = 0; n < 5; n++) spool.push({ n });
    expect(await spool.close()).toBe(5);
    expect(segments(dir)).toHaveLength(1);
    // an event pushed after close is still written, synchronously
    spool.push({ n: 5 });
    const again = new Spool<Item>({ dir });
    expect(again.open().recovered).toBe(6);
    expect((await drainAll(again)).sort((a, b) => a - b)).toEqual([0, 1, 2, 3, 4, 5]);
    await again.close();
  });

  it('a flush writes what was buffered when it began, and ends while pushes go on; close writes everything', async () => {
    const dir = tempDir();
    const spool = new Spool<Item>({ dir, segmentMaxEvents: 50 });
    spool.open();
    let n = 0;
    for (; n < 120; n++) spool.push({ n });
    // Pushes on every turn of the event loop while the flush writes and fsyncs (the writer's
    // case under load): the flush must not chase them until nothing is left.
    let pushing = true;
    const pushMore = () => {
      for (let i = 0; i < 5; i++) spool.push({ n: n++ });
      if (pushing) setImmediate(pushMore);
    };
    setImmediate(pushMore);
    const before = 120;
    await spool.flush();
    pushing = false;
    const durable = spool.peek(1_000_000).length;
    expect(durable).toBeGreaterThanOrEqual(before);
    expect(spool.stats().buffered).toBeGreaterThan(0); // pushed meanwhile, left for the next flush
    await spool.close();
    const again = new Spool<Item>({ dir });
    expect(again.open().recovered).toBe(n);
    expect(await drainAll(again)).toEqual(Array.from({ length: n }, (_, i) => i));
    await again.close();
  });

  it('dead letters keep the event and the reason', async () => {
    const dir = tempDir();
    const spool = new Spool<Item>({ dir });
    spool.open();
    await spool.deadLetter([{ n: 42 }], '22P05: unsupported Unicode escape sequence');
    const line = JSON.parse(readFileSync(spool.deadLetterPath, 'utf8').trim()) as { event: Item; reason: string };
    expect(line).toMatchObject({ event: { n: 42 }, reason: '22P05: unsupported Unicode escape sequence' });
    await spool.close();
    expect(existsSync(spool.deadLetterPath)).toBe(true);
  });
});
