// Each section of the page drawn from one answer of the API.
/* global uPlot */
import { $, el, money, note, show, table } from './dom.js';
import { count, decimalsFor, fromUnits, pct, toUnits, usd } from './numbers.js';

export const zone = Intl.DateTimeFormat().resolvedOptions().timeZone || 'your time zone';
const localTime = new Intl.DateTimeFormat(undefined, {
  year: 'numeric',
  month: 'short',
  day: 'numeric',
  hour: '2-digit',
  minute: '2-digit',
  second: '2-digit',
});
const utcDay = new Intl.DateTimeFormat(undefined, { month: 'short', day: 'numeric', timeZone: 'UTC' });

/** /analytics/summary: the month's cards, spend by model, and by provider (summed exactly). */
export function renderSummary(s) {
  const card = (label, value, detail) =>
    el(
      'div',
      { class: 'card' },
      el('h3', {}, label),
      el('p', { class: 'figure' }, value),
      detail ? el('p', {}, detail) : null,
    );
  $('month')
    .querySelector('.cards')
    .replaceChildren(
      card(`Spend in ${s.month}`, money(s.spend), 'UTC calendar month'),
      card('Requests', count(s.requests)),
      card(
        'Monthly budget',
        s.budget === null ? 'none' : money(s.budget),
        s.budget === null ? null : `${pct(s.budget_utilization_pct)} used${s.hard_cap ? ', hard cap' : ''}`,
      ),
    );
  show(
    $('by-model'),
    s.by_model.length === 0
      ? note('No calls this month.')
      : table(
          [
            ['Model', (r) => r.model],
            ['Provider', (r) => r.provider],
            ['Requests', (r) => count(r.requests), 'num'],
            ['Tokens in / out', (r) => `${count(r.input_tokens)} / ${count(r.output_tokens)}`, 'num'],
            ['Spend', (r) => money(r.spend), 'num'],
          ],
          s.by_model,
        ),
  );
  const providers = new Map();
  for (const m of s.by_model) {
    const p = providers.get(m.provider) ?? { provider: m.provider, units: 0n, requests: 0 };
    p.units += toUnits(m.spend);
    p.requests += m.requests;
    providers.set(m.provider, p);
  }
  const byProvider = [...providers.values()].sort((a, b) => (a.units < b.units ? 1 : a.units > b.units ? -1 : 0));
  show(
    $('by-provider'),
    byProvider.length === 0
      ? note('No calls this month.')
      : table(
          [
            ['Provider', (r) => r.provider],
            ['Requests', (r) => count(r.requests), 'num'],
            ['Spend', (r) => money(fromUnits(r.units)), 'num'],
          ],
          byProvider,
        ),
  );
}

const scopeText = (s) =>
  s.kind === 'account' ? 'whole account' : s.kind === 'tag' ? `tag ${s.key}=${s.value}` : `${s.kind} ${s.value}`;

/** /analytics/budgets: each budget's spend in its current window (dates in the budget's zone). */
export function renderBudgets(body) {
  if (body.budgets.length === 0)
    return show($('budgets'), note('No budgets. Set one with meter budgets create (docs/budgets-and-alerts.md).'));
  show(
    $('budgets'),
    table(
      [
        ['Scope', (b) => scopeText(b.scope)],
        [
          'Window',
          (b) => `${b.window} · ${b.window_start.slice(0, 10)} to ${b.window_end.slice(0, 10)} (${b.timezone})`,
        ],
        ['Spend', (b) => money(b.spend), 'num'],
        ['Budget', (b) => money(b.amount), 'num'],
        [
          'Used',
          (b) => [
            el('meter', { min: 0, max: 100, high: 80, optimum: 0, value: Math.min(Number(b.utilization_pct), 100) }),
            ` ${pct(b.utilization_pct)}`,
          ],
          'num',
        ],
        [
          'Levels',
          (b) =>
            b.levels.map((l) => el('span', { class: b.levels_fired.includes(l) ? 'level fired' : 'level' }, `${l}%`)),
        ],
        ['Action', (b) => b.action],
        ['State', (b) => el('span', { class: `state ${b.state}` }, b.state.replace('_', ' '))],
      ],
      body.budgets,
    ),
  );
}

export const CHART_HEIGHT = 220;
export const chartWidth = () => Math.max(320, $('chart').clientWidth);

/** /analytics/daily: the total, and the days as bars (uPlot, drawn on a canvas); the chart. */
export function drawDaily(body, previous) {
  const days = body.days;
  let total = 0n;
  let requests = 0;
  for (const d of days) {
    total += toUnits(d.spend);
    requests += d.requests;
  }
  show(
    $('daily'),
    el(
      'p',
      { class: 'total' },
      `${days[0].date} to ${days[days.length - 1].date} (UTC): `,
      money(fromUnits(total)),
      ` over ${count(requests)} requests`,
    ),
  );
  const opts = {
    width: chartWidth(),
    height: CHART_HEIGHT,
    // Days are UTC calendar days: the axis shows them so whatever the browser's zone.
    tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), 'Etc/UTC'),
    cursor: { points: { show: false } },
    scales: { x: { time: true }, y: { range: (_u, _min, max) => [0, max > 0 ? max * 1.1 : 1] } },
    axes: [
      { values: (_u, splits) => splits.map((t) => utcDay.format(new Date(t * 1000))) },
      {
        size: 90,
        values: (_u, splits, _axis, _space, step) =>
          splits.map((v) => (v === 0 ? '$0' : `$${v.toFixed(decimalsFor(step))}`)),
      },
    ],
    series: [
      { label: 'UTC day', value: (_u, t) => (t === null ? '—' : new Date(t * 1000).toISOString().slice(0, 10)) },
      {
        label: 'Spend',
        stroke: '#1f6f5c',
        fill: 'rgba(31, 111, 92, 0.35)',
        paths: uPlot.paths.bars({ size: [0.7, 40] }),
        points: { show: false },
        // The legend shows the day's exact figure, not the float the bar is drawn from.
        value: (_u, v, _s, i) => (v === null || i === null ? '—' : usd(days[i].spend)),
      },
    ],
  };
  previous?.destroy();
  const node = $('chart');
  node.replaceChildren();
  const x = days.map((d) => Date.parse(`${d.date}T00:00:00Z`) / 1000);
  const chart = new uPlot(opts, [x, days.map((d) => Number(d.spend))], node);
  node.dataset.drawn = String(days.length);
  if (!performance.getEntriesByName('meter:first-chart').length) performance.mark('meter:first-chart');
  return chart;
}

/** /analytics/by-tag: spend by each value of the chosen key; untagged calls on their own row. */
export function renderByTag(node, body) {
  show(
    node,
    body.groups.length === 0
      ? note(`No calls ${body.from} to ${body.to} (UTC).`)
      : table(
          [
            [body.key, (g) => (g.value === null ? el('em', {}, '(untagged)') : g.value)],
            ['Requests', (g) => count(g.requests), 'num'],
            ['Spend', (g) => money(g.spend), 'num'],
          ],
          body.groups,
          `${body.period}: ${body.from} to ${body.to} (UTC; the end is exclusive)`,
        ),
  );
}

/** /analytics/events: one page, times in the browser's zone (UTC on hover). */
export function renderEvents(node, events) {
  show(
    node,
    events.length === 0
      ? note('No events yet.')
      : table(
          [
            [
              `Time (${zone})`,
              (e) => el('time', { datetime: e.time, title: `${e.time} (UTC)` }, localTime.format(new Date(e.time))),
            ],
            ['Model', (e) => e.model],
            ['Status', (e) => e.status, 'num'],
            ['Tokens in / out', (e) => `${count(e.input_tokens)} / ${count(e.output_tokens)}`, 'num'],
            ['Cost', (e) => (e.usage_source === 'none' ? el('em', {}, 'unknown') : money(e.cost)), 'num'],
            ['Latency', (e) => (e.latency_ms === null ? '—' : `${count(Math.round(e.latency_ms))} ms`), 'num'],
            ['Tags', (e) => Object.entries(e.tags).map(([k, v]) => el('span', { class: 'tag' }, `${k}=${v}`))],
          ],
          events,
        ),
  );
  // The tag keys seen, offered in the by-tag form.
  const keys = new Set(events.flatMap((e) => Object.keys(e.tags)));
  $('tag-keys').replaceChildren(...[...keys].sort().map((k) => el('option', { value: k })));
}

/** /analytics/reconciliation: the last stored result of each provider that has one. */
export function renderReconciliation(node, results) {
  if (!results.length)
    return show(
      node,
      note('No reconciliation has run for this account yet (meter reconcile, docs/reconciliation.md).'),
    );
  show(
    node,
    table(
      [
        ['Provider', (r) => r.provider],
        ['Month', (r) => r.month],
        [
          'Last day',
          (r) =>
            r.days
              .map((d) => d.date)
              .sort()
              .pop(),
        ],
        ['Provider says', (r) => money(r.totals.provider_cost), 'num'],
        ['meter says', (r) => money(r.totals.meter_cost), 'num'],
        ['Difference', (r) => [money(r.totals.diff_usd), ` (${pct(r.totals.diff_pct)})`], 'num'],
        ['Findings', (r) => (r.findings.length ? r.findings.map((f) => f.kind).join(', ') : 'none'), 'num'],
      ],
      results,
    ),
  );
}
