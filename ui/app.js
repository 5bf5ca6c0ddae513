// The spend page: reads this daemon's analytics API with a service key kept in the tab's
// session storage only (never a URL, a cookie, localStorage or a log). Everything shown comes
// from that API; nothing is sent anywhere else.
import { ApiError, explain, get } from './api.js';
import { $, note, notice, show } from './dom.js';
import {
  CHART_HEIGHT,
  chartWidth,
  drawDaily,
  renderBudgets,
  renderByTag,
  renderEvents,
  renderReconciliation,
  renderSummary,
  zone,
} from './sections.js';

const KEY_ITEM = 'meter.key';
/** The tag key the user picked: a preference, not a secret, kept for this tab too. */
const TAG_ITEM = 'meter.tag-key';
const EVENTS_PER_PAGE = 10;
const RECONCILED = ['openai', 'anthropic'];

let key = sessionStorage.getItem(KEY_ITEM);
let chart;
/** Events, newest first: the cursors of the pages seen, so the user can go back. */
let pages = { cursors: [null], index: 0, next: null };

const api = (path) => get(path, key);

/** Loads one section; a refused key signs out, a plan's refusal becomes a note in the section,
 *  anything else a message there (and page-wide when meter or its database is away). */
async function section(id, load) {
  const node = $(id);
  try {
    await load(node);
  } catch (err) {
    if (!(err instanceof ApiError)) throw err;
    if (err.status === 401) return signOut(await explain(err));
    if (err.status === 403 && err.code === 'plan_required')
      return show(node, note(`Not in this key's plan: ${err.message}.`, 'plan'));
    const text = await explain(err);
    if (err.status >= 500 || err.status === 0) notice(text);
    show(node, note(text, 'error'));
  }
}

async function loadByTag(node) {
  const tagKey = $('tag-key').value.trim();
  if (!tagKey) return show(node, note('Pick a tag key (such as team or tenant) to see spend by its values.'));
  const body = await api(`/analytics/by-tag?key=${encodeURIComponent(tagKey)}&period=${$('tag-period').value}`);
  sessionStorage.setItem(TAG_ITEM, tagKey);
  renderByTag(node, body);
}

async function loadEvents(node) {
  const cursor = pages.cursors[pages.index];
  const body = await api(
    `/analytics/events?limit=${EVENTS_PER_PAGE}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
  );
  pages.next = body.next_cursor;
  $('newer').disabled = pages.index === 0;
  $('older').disabled = !pages.next;
  $('page-label').textContent = `page ${pages.index + 1}`;
  renderEvents(node, body.events);
}

const previousMonth = (month) => {
  const [y, m] = month.split('-').map(Number);
  return m === 1 ? `${y - 1}-12` : `${y}-${String(m - 1).padStart(2, '0')}`;
};

/** The last stored result per provider: this month's, else last month's. */
async function loadReconciliation(node, month) {
  const found = [];
  for (const provider of RECONCILED) {
    for (const m of [month, previousMonth(month)]) {
      const r = await api(`/analytics/reconciliation?provider=${provider}&month=${m}`);
      if (r.days.length) {
        found.push(r);
        break;
      }
    }
  }
  renderReconciliation(node, found);
}

async function loadAll() {
  notice('');
  // All at once: the chart does not wait for the summary. "This month" is the UTC month, as the API's.
  const month = new Date().toISOString().slice(0, 7);
  await Promise.all([
    section('month', async () => renderSummary(await api('/analytics/summary'))),
    section('daily', async () => (chart = drawDaily(await api('/analytics/daily?days=30'), chart))),
    section('budgets', async () => renderBudgets(await api('/analytics/budgets'))),
    section('events', loadEvents),
    section('by-tag', loadByTag),
    section('reconciliation', (node) => loadReconciliation(node, month)),
  ]);
}

function signOut(message) {
  key = null;
  sessionStorage.removeItem(KEY_ITEM);
  chart?.destroy();
  chart = undefined;
  pages = { cursors: [null], index: 0, next: null };
  $('dashboard').hidden = true;
  $('session').hidden = true;
  $('login').hidden = false;
  notice(message);
  $('key').focus();
}

function signIn(accepted) {
  key = accepted;
  sessionStorage.setItem(KEY_ITEM, key);
  $('login').hidden = true;
  $('dashboard').hidden = false;
  $('session').hidden = false;
  return loadAll();
}

$('login-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  const typed = $('key').value.trim();
  if (!/^mk_[0-9a-f]{12}_\S+$/.test(typed))
    return notice('That is not a service key: a key looks like mk_<12 hex digits>_<secret> (meter keys create).');
  notice('');
  try {
    // Tried before it is kept: a refused key is stored nowhere.
    await get('/analytics/summary', typed);
  } catch (err) {
    if (!(err instanceof ApiError)) throw err;
    return notice(await explain(err));
  }
  $('key').value = '';
  await signIn(typed);
});

$('sign-out').addEventListener('click', () => signOut(''));
$('refresh').addEventListener('click', () => loadAll());
$('tag-form').addEventListener('submit', (event) => {
  event.preventDefault();
  void section('by-tag', loadByTag);
});
$('newer').addEventListener('click', () => {
  pages.index = Math.max(0, pages.index - 1);
  void section('events', loadEvents);
});
$('older').addEventListener('click', () => {
  if (!pages.next) return;
  pages.cursors[pages.index + 1] = pages.next;
  pages.index += 1;
  void section('events', loadEvents);
});
window.addEventListener('resize', () => chart?.setSize({ width: chartWidth(), height: CHART_HEIGHT }));

$('footer').textContent =
  `Times are shown in ${zone}. Days, months and weeks are UTC calendar days, as the API counts them; ` +
  "budget windows are in each budget's own zone. Read-only: figures from this daemon's /analytics API.";
$('tag-key').value = sessionStorage.getItem(TAG_ITEM) ?? '';
if (key) void signIn(key);
else signOut('');
