/** The proxy bench's table: medians over the rounds, and meter's ratio to each floor. */
import { median, type Name } from './measure.js';

/** One round's figures per target: added latencies (ms, over the direct call's), CPU per call
 *  (µs), req/s at c=64, peak RSS (MB). */
export interface Round {
  c1p50: Map<Name, number>;
  c1p99: Map<Name, number>;
  cpu: Map<Name, number>;
  fb50: Map<Name, number>;
  fb99: Map<Name, number>;
  streamCpu: Map<Name, number>;
  idleCpu: Map<Name, number>;
  rps: Map<Name, number>;
  cpu64: Map<Name, number>;
  /** PostgreSQL's CPU and the whole machine's per call at c=64 (every process, every core). */
  db64: Map<Name, number>;
  machine64: Map<Name, number>;
  streamRps: Map<Name, number>;
  streamCpu64: Map<Name, number>;
  streamDb64: Map<Name, number>;
  streamMachine64: Map<Name, number>;
  rss: Map<Name, number>;
}

type Pick = (r: Round) => Map<Name, number>;

const HEAD: Record<Name, string> = {
  direct: 'direct',
  pass: 'bare pass-through',
  writes: 'floor that writes',
  proxy: 'proxy alone',
  meter: 'meter',
  otel: 'meter + OTel export',
  again: 'meter again (control)',
};

/** The rows of the targets, `target` against the floor that writes where there is one: the proxy
 *  process's own work. Rates at c=64 and PostgreSQL's CPU are printed, not targets (on two shared
 *  cores a rate is the inverse of the whole machine's CPU per call; docs/performance.md). */
/** `postgres`: a row only with meter on PostgreSQL (its CPU is read from /proc: 0 when remote). */
const ROWS: {
  label: string;
  pick: Pick;
  unit: 'ms' | 'µs' | 'rps' | 'MB';
  target?: string;
  embedded?: string;
  postgres?: boolean;
}[] = [
  { label: 'added p50, JSON, c=1', pick: (r) => r.c1p50, unit: 'ms', target: '≤ 1.3×' },
  { label: 'added p99, JSON, c=1', pick: (r) => r.c1p99, unit: 'ms', embedded: '≤ 2× bare' },
  { label: 'CPU per call, JSON, c=1', pick: (r) => r.cpu, unit: 'µs', target: '≤ 1.2×' },
  { label: 'req/s, JSON, c=64', pick: (r) => r.rps, unit: 'rps' },
  { label: 'CPU per call, JSON, c=64', pick: (r) => r.cpu64, unit: 'µs', target: '≤ 1.2×' },
  { label: '… PostgreSQL CPU per call, JSON, c=64', pick: (r) => r.db64, unit: 'µs', postgres: true },
  { label: '… machine CPU per call, JSON, c=64', pick: (r) => r.machine64, unit: 'µs' },
  { label: 'added first byte p50, stream, c=1', pick: (r) => r.fb50, unit: 'ms', target: '≤ 1.2×' },
  { label: 'added first byte p99, stream, c=1', pick: (r) => r.fb99, unit: 'ms' },
  { label: 'CPU per call, stream, c=1', pick: (r) => r.streamCpu, unit: 'µs', target: '≤ 1.2×' },
  { label: 'req/s, stream, c=64', pick: (r) => r.streamRps, unit: 'rps' },
  { label: 'CPU per call, stream, c=64', pick: (r) => r.streamCpu64, unit: 'µs', target: '≤ 1.2×' },
  { label: '… PostgreSQL CPU per call, stream, c=64', pick: (r) => r.streamDb64, unit: 'µs', postgres: true },
  { label: '… machine CPU per call, stream, c=64', pick: (r) => r.streamMachine64, unit: 'µs' },
  { label: '… CPU per call that is idle work', pick: (r) => r.idleCpu, unit: 'µs' },
  { label: 'peak RSS under load', pick: (r) => r.rss, unit: 'MB' },
];

const FORMAT = {
  ms: (v: number) => `${v < 0 ? '' : '+'}${v.toFixed(3)} ms`,
  µs: (v: number) => `${v.toFixed(0)} µs`,
  rps: (v: number) => v.toFixed(0),
  MB: (v: number) => `${v.toFixed(0)} MB`,
};

/** Per row: each target's median over the rounds, and meter ÷ each floor (the median of the
 *  rounds' ratios: both sides of a ratio come from the same round). */
export function summary(rounds: Round[], names: Name[], embedded: boolean) {
  const med = (pick: Pick, n: Name) => median(rounds.map((r) => pick(r).get(n)!));
  const ratio = (pick: Pick, floor: Name) =>
    names.includes(floor) ? median(rounds.map((r) => pick(r).get('meter')! / pick(r).get(floor)!)) : undefined;
  return ROWS.filter((row) => !(embedded && row.postgres)).map((row) => ({
    ...row,
    values: Object.fromEntries(names.map((n) => [n, med(row.pick, n)])) as Partial<Record<Name, number>>,
    vsWrites: ratio(row.pick, 'writes'),
    vsPass: ratio(row.pick, 'pass'),
  }));
}

export function table(rounds: Round[], names: Name[], embedded: boolean): string {
  const proxies = names.filter((n) => n !== 'direct');
  const withWrites = names.includes('writes');
  const cols = ['', ...proxies.map((n) => HEAD[n]), ...(withWrites ? ['meter ÷ floor'] : []), 'meter ÷ bare', 'target'];
  const out = [`| ${cols.join(' | ')} |`, `|${cols.map(() => '---').join('|')}|`];
  const x = (v: number | undefined) => (v === undefined ? '' : `${v.toFixed(2)}×`);
  for (const row of summary(rounds, names, embedded)) {
    const target = embedded ? (row.embedded ?? '') : (row.target ?? '');
    const ratios = row.unit === 'MB' ? ['', ''] : [x(row.vsWrites), x(row.vsPass)];
    out.push(
      `| ${[
        row.label,
        ...proxies.map((n) => FORMAT[row.unit](row.values[n]!)),
        ...(withWrites ? [ratios[0]] : []),
        ratios[1],
        target,
      ].join(' | ')} |`,
    );
  }
  if (names.includes('again')) {
    // Two identical daemons in one run: how far apart they land is the noise a ratio must clear.
    const cpuRows = ROWS.filter((row) => row.unit === 'µs' && row.target);
    const spread = cpuRows.map(
      (row) =>
        `${row.label.replace('CPU per call, ', '')} ${median(rounds.map((r) => row.pick(r).get('again')! / row.pick(r).get('meter')!)).toFixed(2)}×`,
    );
    out.push('', `control, meter again ÷ meter (CPU per call): ${spread.join(', ')}`);
  }
  const direct = (pick: Pick) => median(rounds.map((r) => pick(r).get('direct')!));
  out.push(
    '',
    `direct call (the baseline): p50 ${direct((r) => r.c1p50).toFixed(3)} ms, p99 ${direct((r) => r.c1p99).toFixed(3)} ms; ` +
      `first byte p50 ${direct((r) => r.fb50).toFixed(3)} ms; ${direct((r) => r.rps).toFixed(0)} req/s and ` +
      `${direct((r) => r.streamRps).toFixed(0)} streams/s at c=64`,
  );
  return out.join('\n');
}
