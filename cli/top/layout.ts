/**
 * The frame as lines of styled segments, for a given terminal size: a pure function of the
 * figures, so a frame at 80 or 160 columns is the same whatever draws it (Ink, or plain text).
 * It is at most `height - 1` lines: Ink clears the whole screen before a frame as tall as the
 * terminal, and that is what flickers.
 */
import { printable } from '../../src/printable.js';
import type { Figures } from './derive.js';
import { budgetLines } from './budget-lines.js';
import {
  budgetBar,
  count,
  countShort,
  fit,
  fitMiddle,
  modelName,
  ms,
  pct,
  sparkline,
  usd,
  usdTotal,
} from './format.js';

export interface Segment {
  text: string;
  color?: 'green' | 'yellow' | 'red' | 'cyan';
  bold?: boolean;
  dim?: boolean;
}
export type Line = Segment[];

export interface FrameState {
  width: number;
  height: number;
  paused?: boolean;
  help?: boolean;
  /** The last refresh failed: shown in the footer, the figures stay. */
  error?: string;
}

/** Every segment drawn is printable, whatever a caller put in a tag or a model name. */
const seg = (text: string, style: Omit<Segment, 'text'> = {}): Segment => ({ text: printable(text), ...style });
const label = (text: string) => seg(text, { dim: true });

/** The text of a line (what a non-colour frame prints). */
export const lineText = (line: Line) => line.map((s) => s.text).join('');

function levelColor(utilization: string | null): Segment['color'] {
  if (utilization === null) return 'green';
  const u = Number(utilization);
  return u >= 80 ? 'red' : u >= 50 ? 'yellow' : 'green';
}

function header(f: Figures, s: FrameState): Line {
  const left = `meter top  ${f.account} (${f.plan})  fleet-wide  every ${f.interval_s}s`;
  const right = `${s.paused ? 'PAUSED  ' : ''}${f.at.slice(0, 19).replace('T', ' ')} UTC`;
  const gap = Math.max(1, s.width - left.length - right.length);
  return [
    seg(left, { bold: true }),
    seg(' '.repeat(gap)),
    seg(right, s.paused ? { color: 'yellow', bold: true } : { dim: true }),
  ];
}

function monthLines(f: Figures, s: FrameState): Line[] {
  const m = f.month;
  if (m.budget === null) {
    return [
      [
        label('Month '),
        seg(`${m.month}  `),
        seg(usdTotal(m.spend), { bold: true }),
        seg(`  ${count(m.requests)} calls  `),
        label('no budget'),
      ],
      [label(`Budget none: meter budget set --account ${f.account} --monthly <usd>`)],
    ];
  }
  const cap =
    m.hard_cap === 'off'
      ? 'no hard cap'
      : m.hard_cap === 'on'
        ? 'hard cap on'
        : s.width >= 100
          ? 'hard cap REACHED: calls refused (402)'
          : 'hard cap REACHED (402)';
  const fired = m.levels_fired.length ? ` fired ${m.levels_fired.join(',')}` : '';
  const color = levelColor(m.utilization_pct);
  const suffix = ` 50·80·100%${fired}`;
  const bar = budgetBar(m.spend, m.budget, Math.max(10, s.width - 9 - suffix.length));
  return [
    [
      label('Month '),
      seg(`${m.month}  `),
      seg(usdTotal(m.spend), { bold: true }),
      seg(` of ${usdTotal(m.budget)}  `),
      seg(`${m.utilization_pct}%`, { color, bold: true }),
      seg(`  ${count(m.requests)} calls  `),
      seg(cap, m.hard_cap === 'reached' ? { color: 'red', bold: true } : {}),
    ],
    [label('Budget '), seg('['), seg(bar.filled, { color }), seg(bar.empty, { dim: true }), seg(']'), label(suffix)],
  ];
}

function rateLines(f: Figures, s: FrameState): Line[] {
  const w = f.window;
  const errColor = (w.error_rate_pct ?? 0) >= 5 ? 'red' : undefined;
  const wide = s.width >= 100;
  const sparkWidth = Math.min(f.spend_per_minute.length, Math.max(10, s.width - 29));
  const spark = f.spend_per_minute.slice(-sparkWidth);
  const max = spark.reduce((a, b) => (Number(b) > Number(a) ? b : a), '0');
  return [
    [
      label('Burn  '),
      seg(`${usd(f.burn.per_hour_5m)}/h`, { bold: true }),
      label(' 5 min  '),
      seg(`${usd(f.burn.per_hour_60m)}/h`),
      label(' 60 min  '),
      label('month end ≈ '),
      seg(usd(f.burn.projected_month_end), { bold: true }),
    ],
    [
      label(`Last ${w.seconds}s  `),
      seg(`${w.calls_per_s} calls/s`, { bold: true }),
      label(wide ? '  errors ' : '  err '),
      seg(pct(w.error_rate_pct), errColor ? { color: errColor } : {}),
      label('  p50 '),
      seg(ms(w.p50_ms)),
      label('  p95 '),
      seg(ms(w.p95_ms)),
      label(wide ? '  estimated ' : '  est '),
      seg(pct(w.estimated_pct)),
      label(wide ? '  unpriced ' : '  unpr '),
      seg(pct(w.unpriced_pct)),
    ],
    [
      label('Spend/min '),
      seg(spark.join('') === '' ? '' : sparkline(spark), { color: 'cyan' }),
      label(` ${spark.length}m, max ${usdTotal(max)}`),
    ],
  ];
}

function groupTables(f: Figures, s: FrameState, rows: number): Line[] {
  const leftW = Math.floor((s.width - 1) / 2);
  const rightW = s.width - 1 - leftW;
  // Each number keeps a space before it, so a wide amount is cut, never run into its neighbour.
  const nameWidth = (w: number) => w - 12 - 9;
  const table = (title: string, items: { name: string; spend: string; requests: string }[], w: number) => {
    const nameW = nameWidth(w);
    const cols = (name: string, spend: string, calls: string) =>
      `${fit(name, nameW)} ${fit(spend, 11, 'right')} ${fit(calls, 8, 'right')}`;
    const lines = [cols(title, 'spend', 'calls')];
    for (const it of items.slice(0, rows)) lines.push(cols(it.name, usdTotal(it.spend), countShort(it.requests)));
    while (lines.length < rows + 1) lines.push(' '.repeat(w));
    return lines;
  };
  const models = table(
    'By model, month',
    f.by_model.map((m) => ({ name: modelName(m.provider, m.model, nameWidth(leftW)), ...m })),
    leftW,
  );
  const tagTitle =
    f.by_tag.key === null ? 'No tags this month' : fitMiddle(`By tag ${f.by_tag.key}, month`, nameWidth(rightW));
  const tags = table(
    tagTitle,
    f.by_tag.groups.map((g) => ({
      name: g.value === null ? '(untagged)' : fitMiddle(g.value, nameWidth(rightW)),
      ...g,
    })),
    rightW,
  );
  return models.map((l, i) => (i === 0 ? [label(l), seg(' '), label(tags[i]!)] : [seg(l), label('│'), seg(tags[i]!)]));
}

function tailLines(f: Figures, s: FrameState, rows: number): Line[] {
  const wide = s.width >= 120;
  const cols = [8, wide ? 10 : 9, wide ? 28 : 16, wide ? 15 : 11, wide ? 11 : 9, 7, 3];
  const head = ['time', 'provider', 'model', 'in→out', 'cost', 'latency', 'st'];
  const fixed = cols.reduce((a, b) => a + b + 1, 0);
  const line = (cells: string[]) => cells.map((c, i) => fit(c, cols[i]!, i >= 3 ? 'right' : 'left')).join(' ') + ' ';
  const out: Line[] = [[label(line(head) + 'tags')]];
  for (const t of f.tail.slice(0, rows)) {
    const tags = Object.entries(t.tags)
      .map(([k, v]) => `${k}=${v}`)
      .join(' ');
    const status = t.status >= 400 ? { color: 'red' as const } : {};
    const cells = [
      t.time.slice(11, 19),
      t.provider,
      modelName(undefined, t.model, cols[2]!),
      `${count(t.input_tokens)}→${count(t.output_tokens)}`,
      t.unpriced ? 'unpriced' : usd(t.cost, 6),
      ms(t.latency_ms),
    ];
    out.push([
      seg(line(cells)),
      seg(fit(String(t.status), 3, 'right'), status),
      seg(' '),
      label(fit(tags, Math.max(0, s.width - fixed - 1)).trimEnd()),
    ]);
  }
  while (out.length < rows + 1) out.push([seg(' ')]);
  return out;
}

const HELP = [
  'Keys',
  '  q, Ctrl-C  quit (the terminal is restored)',
  '  t          next tag key for the "by tag" table',
  '  a          next account',
  '  p          pause / resume refreshing',
  '  ?          this help (any key closes it)',
  'Figures (fleet-wide: every sidecar writing to this store)',
  '  Month      spend this UTC month from the daily rollups, against the budget',
  '  Burn       spend recorded in the last 5 / 60 minutes, per hour',
  '  month end  spend so far + the 60-minute burn rate × hours left in the month',
  '  Last 60s   calls recorded in the last 60 s: rate, error share (status ≥ 400),',
  '             latency p50/p95, share of estimated usage and of unpriced models',
  '  Spend/min  spend recorded in each of the last 60 minutes, the current one last',
];

function footer(f: Figures, s: FrameState): Line {
  const acct = f.accounts.length > 1 ? ` (${f.accounts.indexOf(f.account) + 1}/${f.accounts.length})` : '';
  const keys = `q quit  t tag key  a account${acct}  p ${s.paused ? 'resume' : 'pause'}  ? help`;
  if (!s.error) return [label(keys)];
  // The error matters more than the key list; q and ? still say how to leave and where help is.
  const tail = '  q quit  ? help';
  return [
    seg(fit(`refresh failed: ${s.error}`, Math.max(10, s.width - tail.length)).trimEnd(), { color: 'red' }),
    label(tail),
  ];
}

/** The whole frame: at most height - 1 lines of at most width characters. */
export function frameLines(f: Figures, s: FrameState): Line[] {
  const top = [header(f, s), ...monthLines(f, s), ...budgetLines(f, s), ...driftLines(f), ...rateLines(f, s)];
  const room = Math.max(4, s.height - 1 - top.length - 1); // minus the footer
  let body: Line[];
  if (s.help) {
    body = HELP.slice(0, room).map((t) => [seg(t)]);
    while (body.length < room) body.push([seg(' ')]);
  } else {
    const tableRows = Math.min(10, Math.max(2, Math.floor((room - 2) * 0.4)));
    const tailRows = Math.max(1, room - 2 - tableRows);
    body = [...groupTables(f, s, tableRows), ...tailLines(f, s, tailRows)];
  }
  return [...top, ...body, footer(f, s)].map((line) => clip(line, s.width));
}

/** The month's drift from each provider's own report (`meter reconcile`), once one ran. */
function driftLines(f: Figures): Line[] {
  if (f.reconciliation.length === 0) return [];
  return [
    [
      label('Drift '),
      ...f.reconciliation.flatMap((r, i) => {
        const off = r.diff_pct !== null && Math.abs(Number(r.diff_pct)) >= 2;
        return [
          seg(`${i ? '  ' : ''}${r.provider} `),
          seg(`${r.diff_pct === null ? '-' : `${r.diff_pct}%`}`, { color: off ? 'yellow' : 'green', bold: off }),
          seg(` (${usd(r.meter_cost)} vs ${usd(r.provider_cost)} billed)`, { dim: true }),
        ];
      }),
    ],
  ];
}

/** Cuts a line's segments at `width` characters. */
function clip(line: Line, width: number): Line {
  const out: Line = [];
  let left = width;
  for (const s of line) {
    if (left <= 0) break;
    out.push(s.text.length <= left ? s : { ...s, text: s.text.slice(0, left) });
    left -= Math.min(left, s.text.length);
  }
  return out;
}
