/** Events as one JSON array in UTF-8 (`[line,line,…]`), as the spool hands a batch out and the
 *  batch statement reads it, and where each line ends in it (its `,`, or the closing `]`). */
export interface EventRun {
  readonly json: Buffer;
  readonly count: number;
  readonly ends: readonly number[];
}

/** Event `i` of a run, as its JSON line. */
export function lineOf(run: EventRun, i: number): string {
  return run.json.toString('utf8', i === 0 ? 1 : run.ends[i - 1]! + 1, run.ends[i]);
}

/** Events `from` to `to` (not included) of a run, as a run of their own (a copy). */
export function slice(run: EventRun, from: number, to: number): EventRun {
  const start = from === 0 ? 1 : run.ends[from - 1]! + 1;
  const end = run.ends[to - 1]!;
  const json = Buffer.allocUnsafe(end - start + 2);
  json[0] = 0x5b;
  run.json.copy(json, 1, start, end);
  json[json.length - 1] = 0x5d;
  return { json, count: to - from, ends: run.ends.slice(from, to).map((e) => e - start + 1) };
}
