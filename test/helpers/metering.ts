import type { IncomingHttpHeaders } from 'node:http';
import type { CallMeter, CallStart, Metering } from '../../src/metering/types.js';

/** What the proxy told the metering about one call, in order. */
export interface RecordedCall {
  start: CallStart;
  steps: string[];
  requestBody?: Buffer | undefined;
  status?: number;
  headers?: IncomingHttpHeaders;
  /** The chunks, kept only up to KEEP_CHUNK_BYTES (a 100 MB test must not keep them). */
  chunks: Buffer[];
  chunkBytes: number;
  outcome?: { completed: boolean; status?: number; clientLeft?: boolean };
}

const KEEP_CHUNK_BYTES = 8 * 1024 * 1024;

/** A Metering that records every call: lets tests see exactly how the proxy feeds it. */
export class RecordingMetering implements Metering {
  readonly calls: RecordedCall[] = [];
  private waiters: ((c: RecordedCall) => void)[] = [];

  begin(start: CallStart): CallMeter {
    const call: RecordedCall = { start, steps: ['begin'], chunks: [], chunkBytes: 0 };
    this.calls.push(call);
    return {
      requestBody: (body) => {
        call.steps.push('requestBody');
        call.requestBody = body;
      },
      responseHead: (status, headers) => {
        call.steps.push('responseHead');
        call.status = status;
        call.headers = headers;
      },
      responseChunk: (chunk) => {
        if (call.steps.at(-1) !== 'responseChunk') call.steps.push('responseChunk');
        call.chunkBytes += chunk.length;
        if (call.chunkBytes <= KEEP_CHUNK_BYTES) call.chunks.push(chunk);
      },
      end: (outcome) => {
        call.steps.push('end');
        call.outcome = outcome;
        for (const w of this.waiters.splice(0)) w(call);
      },
    };
  }

  /** Resolves when the call with this id has ended. */
  async ended(id: string, timeoutMs = 5_000): Promise<RecordedCall> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const call = this.calls.find((c) => c.start.id === id);
      if (call?.outcome) return call;
      if (Date.now() > deadline) throw new Error(`call ${id} did not end within ${timeoutMs} ms`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, 50);
        this.waiters.push(() => (clearTimeout(t), resolve()));
      });
    }
  }
}
