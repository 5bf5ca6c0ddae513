import { describe, expect, it } from 'vitest';
import { createFramer, StreamFramer, streamFormat, type StreamFormat } from '../../src/providers/framing.js';

type Ev = [string, string | undefined];

function frame(format: StreamFormat, reads: (string | Uint8Array)[], maxEventBytes?: number) {
  const events: Ev[] = [];
  const framer = new StreamFramer(format, { onEvent: (d, e) => events.push([d, e]) }, { maxEventBytes });
  for (const r of reads) framer.push(typeof r === 'string' ? Buffer.from(r, 'utf8') : r);
  framer.flush();
  return { events, framer };
}

describe('streamFormat', () => {
  it('knows SSE and the NDJSON content types, with parameters and any case', () => {
    expect(streamFormat('text/event-stream; charset=utf-8')).toBe('sse');
    expect(streamFormat('Text/Event-Stream')).toBe('sse');
    expect(streamFormat('application/stream+json')).toBe('ndjson');
    expect(streamFormat('application/x-ndjson')).toBe('ndjson');
    expect(streamFormat('application/jsonl')).toBe('ndjson');
    expect(streamFormat('application/json')).toBeUndefined();
    expect(streamFormat(undefined)).toBeUndefined();
    expect(createFramer('application/json', { onEvent() {} })).toBeUndefined();
    expect(createFramer('text/event-stream', { onEvent() {} })).toBeInstanceOf(StreamFramer);
  });
});

describe('SSE framing', () => {
  it('reads event names, joins multi-line data with \\n, skips comments, id and retry', () => {
    const { events } = frame('sse', [
      ': keep-alive\n\nevent: a\nid: 7\nretry: 10\ndata: one\ndata:two\ndata:  three\n\ndata\n\n',
    ]);
    expect(events).toEqual([
      ['one\ntwo\n three', 'a'],
      ['', undefined],
    ]);
  });

  it('does not mistake a CRLF split across reads for two line ends', () => {
    const { events } = frame('sse', ['data: a\r', '\ndata: b\r\n\r', '\n']);
    expect(events).toEqual([['a\nb', undefined]]);
  });

  it('takes a lone CR as a line end', () => {
    expect(frame('sse', ['data: a\rdata: b\r\rdata: c\r\r']).events).toEqual([
      ['a\nb', undefined],
      ['c', undefined],
    ]);
  });

  it('decodes a multi-byte character split across reads at every byte', () => {
    const bytes = Buffer.from('data: {"t":"é😊漢"}\n\n', 'utf8');
    for (let i = 0; i <= bytes.length; i++) {
      for (let j = i; j <= bytes.length; j++) {
        const { events } = frame('sse', [bytes.subarray(0, i), bytes.subarray(i, j), bytes.subarray(j)]);
        expect(events).toEqual([['{"t":"é😊漢"}', undefined]]);
      }
    }
  });

  it('accepts plain Uint8Array reads and strips a leading BOM', () => {
    const u8 = new TextEncoder().encode('\uFEFFdata: x\n\n');
    expect(frame('sse', [u8]).events).toEqual([['x', undefined]]);
  });

  it('flushes a last event that has no trailing blank line', () => {
    expect(frame('sse', ['data: a\n\ndata: b']).events).toEqual([
      ['a', undefined],
      ['b', undefined],
    ]);
    expect(frame('sse', ['data: a\n\nevent: e\ndata: b\n']).events).toEqual([
      ['a', undefined],
      ['b', 'e'],
    ]);
  });

  it('drops an event larger than the limit, counts it, and keeps the next ones', () => {
    const big = `data: ${'x'.repeat(5000)}\n`;
    const { events, framer } = frame(
      'sse',
      ['data: small\n\n', `event: huge\n${big}${big}\n`, 'data: after\n\n'],
      1024,
    );
    expect(events).toEqual([
      ['small', undefined],
      ['after', undefined],
    ]);
    expect(framer.dropped).toBe(1);
  });

  it('drops an event whose lines are each small but whose total is over the limit', () => {
    const lines = Array.from({ length: 50 }, () => `data: ${'y'.repeat(40)}\n`).join('');
    const { events, framer } = frame('sse', [lines, '\n', 'data: ok\n\n'], 1024);
    expect(events).toEqual([['ok', undefined]]);
    expect(framer.dropped).toBe(1);
  });

  it('keeps memory bounded while a huge event streams in, in any read size', () => {
    const events: Ev[] = [];
    const framer = new StreamFramer('sse', { onEvent: (d, e) => events.push([d, e]) }, { maxEventBytes: 64 * 1024 });
    const read = Buffer.alloc(16 * 1024, 0x61);
    framer.push(Buffer.from('data: '));
    let maxPending = 0;
    for (let i = 0; i < 4096; i++) {
      // 64 MiB in one line
      framer.push(read);
      maxPending = Math.max(maxPending, (framer as unknown as { pendingLen: number }).pendingLen);
    }
    framer.push(Buffer.from('\n\ndata: next\n\n'));
    framer.flush();
    expect(maxPending).toBeLessThanOrEqual(64 * 1024);
    expect(framer.dropped).toBe(1);
    expect(events).toEqual([['next', undefined]]);
  });
});

describe('NDJSON framing', () => {
  it('gives one event per line, skipping blank lines, trimming CR and spaces', () => {
    const { events } = frame('ndjson', ['{"a":1}\r\n\n  {"b":2}  \n{"c":', '3}']);
    expect(events).toEqual([
      ['{"a":1}', undefined],
      ['{"b":2}', undefined],
      ['{"c":3}', undefined],
    ]);
  });

  it('drops a line larger than the limit and resumes at the next line', () => {
    const { events, framer } = frame('ndjson', ['{"a":1}\n{"big":"', 'z'.repeat(3000), '"}\n{"b":2}\n'], 1024);
    expect(events).toEqual([
      ['{"a":1}', undefined],
      ['{"b":2}', undefined],
    ]);
    expect(framer.dropped).toBe(1);
  });
});
