import { appendFileSync, existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { lineOf, slice, type EventRun } from '../../src/store/event-run.js';
import { Spool } from '../../src/store/spool.js';
import { tempDir } from '../helpers/stores.js';

interface Item {
  n: number;
}

const segments = (dir: string) =>
  readdirSync(dir)
    .filter((f) => f.startsWith('seg-'))
    .sort();

/** Ships everything like the writer does: flush, read, ack; returns what was shipped. Each
 *  batch must be one JSON array of its events, as the database reads it. */
async function drainAll<T>(spool: Spool<T>, batch = 10, onBatch?: (got: EventRun, items: T[]) => void): Promise<T[]> {
  const shipped: T[] = [];
  for (let guard = 0; guard < 100_000; guard++) {
    await spool.flush();
    const got = await spool.read(batch);
    if (!got) break;
    const items = JSON.parse(got.json.toString()) as T[];
    expect(items).toHaveLength(got.count);
    shipped.push(...items);
    onBatch?.(got, items);
    await spool.ack(got);
  }
  return shipped;
}

const numbers = (items: Item[]) => items.map((i) => i.n);

describe('Spool', () => {
  it('hands out only durable events, in order, and deletes segments once acknowledged', async () => {
    const dir = tempDir();
    const spool = new Spool<Item>({ dir, segmentMaxEvents: 10 });
    expect(spool.open().recovered).toBe(0);
    for (let n = 0; n < 25; n++) spool.push({ n });
    expect(await spool.read(100)).toBeUndefined(); // nothing is shipped before it is on disk
    expect(spool.stats()).toMatchObject({ buffered: 25, backlog: 25 });
    await spool.flush();
    expect(segments(dir)).toHaveLength(3);
    expect(readFileSync(join(dir, segments(dir)[0]!), 'utf8').split('\n')[3]).toBe('{"n":3}');
    expect(spool.stats()).toMatchObject({ buffered: 0, backlog: 25 });
    // a batch never spans two segments
    const first = await spool.read(100);
    expect(first).toMatchObject({ count: 10 });
    expect(JSON.parse(first!.json.toString())).toEqual(Array.from({ length: 10 }, (_, n) => ({ n })));
    expect(numbers(await drainAll(spool))).toEqual(Array.from({ length: 25 }, (_, n) => n));
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
    expect(await again.oldest()).toEqual(items[0]);
    // Read back in batches of 700, past the reader's first guess of their size.
    const back = await drainAll(again, 700, (batch, got) => {
      for (let i = 0; i < batch.count; i += 97) expect(JSON.parse(lineOf(batch, i))).toEqual(got[i]);
    });
    expect(back).toEqual([...items, { n: 3_000, s: '末尾' }]);
    expect(again.stats().backlog).toBe(0);
    await again.close();
  });

  it('holds in memory only what is not on disk: a backlog waits in its segments and comes back exactly once', async () => {
    const dir = tempDir();
    const spool = new Spool<Item>({ dir, segmentMaxEvents: 64 });
    spool.open();
    let maxBuffered = 0;
    const total = 5_000;
    for (let n = 0; n < total; n++) {
      spool.push({ n });
      maxBuffered = Math.max(maxBuffered, spool.stats().buffered);
      if (n % 700 === 699) await spool.flush();
    }
    expect(maxBuffered).toBe(700);
    await spool.flush();
    expect(spool.stats()).toMatchObject({ buffered: 0, backlog: total });
    expect(spool.backlogBytes()).toBe(segments(dir).reduce((sum, f) => sum + readFileSync(join(dir, f)).length, 0));
    // events keep arriving while the backlog drains
    let next = total;
    const shipped = numbers(
      await drainAll(spool, 20, () => {
        for (let i = 0; i < 10 && next < total + 300; i++) spool.push({ n: next++ });
      }),
    );
    expect(shipped).toEqual(Array.from({ length: total + 300 }, (_, n) => n));
    expect(spool.stats()).toMatchObject({ backlog: 0, buffered: 0 });
    expect(spool.backlogBytes()).toBe(0);
    await spool.close();
    expect(segments(dir)).toHaveLength(0);
  });

  it('reads a line far longer than the others whole, however small the batch asked for', async () => {
    const dir = tempDir();
    const spool = new Spool<{ n: number; s?: string }>({ dir });
    spool.open();
    const big = { n: 1, s: 'x'.repeat(300_000) };
    const items = [{ n: 0 }, big, ...Array.from({ length: 1_000 }, (_, i) => ({ n: i + 2 }))];
    for (const item of items) spool.push(item);
    await spool.flush();
    expect(await drainAll(spool, 1)).toEqual(items);
    await spool.close();
  });

  it('a batch can be cut into parts and lines, each still the events as JSON', async () => {
    const dir = tempDir();
    const spool = new Spool<{ n: number; s?: string }>({ dir });
    spool.open();
    const items = [{ n: 0 }, { n: 1, s: 'a,b]"\\' }, { n: 2, s: 'ü€😀' }, { n: 3 }, { n: 4, s: '[' }];
    for (const item of items) spool.push(item);
    await spool.flush();
    const batch = (await spool.read(10))!;
    expect(batch.count).toBe(5);
    for (const [from, to] of [
      [0, 5],
      [0, 2],
      [2, 5],
      [1, 2],
      [4, 5],
    ] as const) {
      const part = slice(batch, from, to);
      expect(JSON.parse(part.json.toString())).toEqual(items.slice(from, to));
      for (let i = 0; i < part.count; i++) expect(JSON.parse(lineOf(part, i))).toEqual(items[from + i]);
    }
    await spool.close();
  });

  it('a new run replays what the last one left, and drops a line cut short by a crash', async () => {
    const dir = tempDir();
    const first = new Spool<Item>({ dir, segmentMaxEvents: 8 });
    first.open();
    for (let n = 0; n < 20; n++) first.push({ n });
    await first.flush();
    // the first 8 were written and acknowledged; then the process died (no close)
    const batch = await first.read(8);
    expect(batch?.count).toBe(8);
    await first.ack(batch!);
    const last = segments(dir).at(-1)!;
    appendFileSync(join(dir, last), '{"n":9');

    const second = new Spool<Item>({ dir, segmentMaxEvents: 8 });
    expect(second.open()).toEqual({ recovered: 12, truncatedTails: 1 });
    expect(readFileSync(join(dir, last), 'utf8').endsWith('\n')).toBe(true);
    second.push({ n: 100 });
    expect(numbers(await drainAll(second))).toEqual([...Array.from({ length: 12 }, (_, i) => i + 8), 100]);
    expect(await second.close()).toBe(0);
    expect(segments(dir)).toHaveLength(0);
  });

  it('a line that is not JSON (a torn write) is handed out with the rest: the database rejects it, and it is dead-lettered as it is', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'seg-000000000007.jsonl'), '{"n":1}\n\u0000\u0000garbage\n{"n":2}\n');
    const spool = new Spool<Item>({ dir });
    expect(spool.open().recovered).toBe(3);
    const batch = (await spool.read(10))!;
    expect(batch.count).toBe(3);
    expect(() => JSON.parse(batch.json.toString())).toThrow();
    expect(JSON.parse(slice(batch, 2, 3).json.toString())).toEqual([{ n: 2 }]);
    await spool.deadLetter([lineOf(batch, 1), lineOf(batch, 2)], '22P02: invalid input syntax for type json');
    await spool.ack(batch);
    expect(await spool.close()).toBe(0);
    const letters = readFileSync(spool.deadLetterPath, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(letters[0]).toMatchObject({
      reason: 'unreadable spool line (22P02: invalid input syntax for type json)',
      line: '\u0000\u0000garbage',
    });
    expect(letters[1]).toMatchObject({ reason: '22P02: invalid input syntax for type json', event: { n: 2 } });
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
    expect(numbers(await drainAll(again)).sort((a, b) => a - b)).toEqual([0, 1, 2, 3, 4, 5]);
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
    expect(spool.stats().backlog - spool.stats().buffered).toBeGreaterThanOrEqual(before);
    expect(spool.stats().buffered).toBeGreaterThan(0); // pushed meanwhile, left for the next flush
    expect(await spool.oldest()).toEqual({ n: 0 });
    await spool.close();
    const again = new Spool<Item>({ dir });
    expect(again.open().recovered).toBe(n);
    expect(numbers(await drainAll(again))).toEqual(Array.from({ length: n }, (_, i) => i));
    await again.close();
  });

  it('dead letters keep the event and the reason', async () => {
    const dir = tempDir();
    const spool = new Spool<Item>({ dir });
    spool.open();
    await spool.deadLetter([JSON.stringify({ n: 42 })], '22P05: unsupported Unicode escape sequence');
    const line = JSON.parse(readFileSync(spool.deadLetterPath, 'utf8').trim()) as { event: Item; reason: string };
    expect(line).toMatchObject({ event: { n: 42 }, reason: '22P05: unsupported Unicode escape sequence' });
    await spool.close();
    expect(existsSync(spool.deadLetterPath)).toBe(true);
  });
});
