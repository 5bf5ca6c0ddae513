/**
 * Batch results downloaded through the proxy (README "Batch results"): a JSONL file with one
 * line per request of the batch. Each provider says which path downloads them and how to read
 * one parsed line; the rest is shared here. A line is parsed only when it can carry usage
 * (errored, canceled and expired requests carry none and cost nothing).
 */
import { parse, type Obj } from './common.js';
import { hasObjectField } from './scan.js';
import type { BatchResultLine, BatchResults, RequestInfo } from './types.js';

/** The first group of `pattern` in the request path (a batch or file id), percent-decoded. */
export function pathId(req: RequestInfo, pattern: RegExp): string | undefined {
  const m = pattern.exec(req.path);
  if (!m?.[1]) return undefined;
  try {
    return decodeURIComponent(m[1]);
  } catch {
    return m[1];
  }
}

/** Results of batch `id`, each line read by `read` once it is parsed. */
export function batchResults(id: string, read: (line: Obj) => BatchResultLine | undefined): BatchResults {
  return {
    id,
    readLine(line: string): BatchResultLine | undefined {
      if (!hasObjectField(line, 'usage')) return undefined;
      const o = parse(line);
      return o && read(o);
    },
  };
}
