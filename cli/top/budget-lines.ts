/**
 * `meter top`'s budget bars: one line per budget of the account other than its monthly budget
 * (drawn above as the Budget line): scope, window and zone, a bar of its window's spend, the
 * utilisation and what its action does there.
 */
import { printable } from '../../src/printable.js';
import type { Figures } from './derive.js';
import { budgetBar, fit, usdTotal } from './format.js';
import type { FrameState, Line, Segment } from './layout.js';

/** Most budget lines drawn; more are summed up in one line. */
const MAX_LINES = 6;

const seg = (text: string, style: Omit<Segment, 'text'> = {}): Segment => ({ text: printable(text), ...style });

const STATE_TEXT: Record<string, string> = {
  ok: '',
  alerting: 'alerting',
  blocked: 'BLOCKED (402)',
  would_block: 'would block',
};

export function budgetLines(f: Figures, s: FrameState): Line[] {
  const list = f.budgets.filter((b) => !b.account_budget);
  const shown = list.slice(0, list.length > MAX_LINES ? MAX_LINES - 1 : MAX_LINES);
  const names = shown.map((b) => `${b.scope} ${b.window} ${b.timezone}`);
  const suffixes = shown.map((b) => {
    const shadow = b.action === 'shadow' && b.shadow_refusals > 0 ? `, ${b.shadow_refusals} would-be refusals` : '';
    const state = STATE_TEXT[b.state] ? `: ${STATE_TEXT[b.state]}` : '';
    return ` ${b.utilization_pct}% of ${usdTotal(b.amount)} ${b.action}${state}${shadow}`;
  });
  // One bar width for every budget, so the bars line up.
  const nameW = Math.min(Math.max(0, ...names.map((n) => n.length)), Math.floor(s.width * 0.4));
  const barW = Math.max(6, s.width - nameW - Math.max(0, ...suffixes.map((x) => x.length)) - 3);
  const out: Line[] = shown.map((b, i) => {
    const u = Number(b.utilization_pct);
    const color = b.state === 'blocked' || u >= 80 ? 'red' : u >= 50 ? 'yellow' : 'green';
    const bar = budgetBar(b.spend, b.amount, barW);
    return [
      seg(fit(names[i]!, nameW), { dim: true }),
      seg(' ['),
      seg(bar.filled, { color }),
      seg(bar.empty, { dim: true }),
      seg(']'),
      seg(suffixes[i]!, b.state === 'blocked' ? { color: 'red', bold: true } : {}),
    ];
  });
  if (list.length > MAX_LINES)
    out.push([
      seg(`… ${list.length - MAX_LINES + 1} more budgets: meter budgets list --account ${f.account}`, { dim: true }),
    ]);
  return out;
}
