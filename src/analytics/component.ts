/**
 * The analytics API (CONTRACT §4) as a daemon component: GET /analytics/{daily,summary,by-tag,
 * events,budgets,…}, behind the service key and scoped to its account. Checks run in this order:
 * key (401), route (404), method (405), plan (403), parameters (400).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Authenticator, Principal } from '../auth/types.js';
import type { Component } from '../component.js';
import { sendError, sendJson } from '../http.js';
import type { Logger } from '../log.js';
import { ExportSlots, serveExport } from '../export/http.js';
import type { ReadBudget } from '../store/read-budget.js';
import type { Queryable } from '../store/types.js';
import { listEvents } from './events-query.js';
import { stringifyJson, type JsonValue } from '../money.js';
import { byTagParams, dailyParams, eventsParams, parseParams, summaryParams, type ParamResult } from './params.js';
import { createPlanGate, type Endpoint, type PlanGate } from './plan-gate.js';
import { byTag, daily, summary } from './rollup-queries.js';
import { reconciliationForAccount, reconciliationParams } from '../reconcile/endpoint.js';
import { accountBudgets } from '../budget/analytics.js';

export interface AnalyticsOptions {
  store: Queryable;
  authenticator: Authenticator;
  /** The clock that decides "today" and "this month" (UTC); tests pin it. */
  now?: () => Date;
  /** Hide raw events older than the account's plan retention (TimescaleDB mode). */
  retentionVisibility?: boolean;
  /** Which endpoints each plan includes; by default read from the plans table (cached). */
  planGate?: PlanGate;
  logger?: Pick<Logger, 'error' | 'info'>;
  /** The share of the store's connections a client's reads may hold (src/store/read-budget.ts);
   *  without it, reads go to the store directly. */
  reads?: ReadBudget;
}

type Run = (principal: Principal, search: URLSearchParams, db: Queryable) => Promise<ParamResult<JsonValue>>;

export function createAnalytics({
  store,
  authenticator,
  now = () => new Date(),
  planGate,
  retentionVisibility,
  logger,
  reads,
}: AnalyticsOptions): Component {
  const gate = planGate ?? createPlanGate(store);
  // TimescaleDB mode finds tagged events through its tag table (sql/110), the others by time windows.
  const timescale = 'kind' in store && store.kind === 'timescale';
  const exports = new ExportSlots();

  /** Validates the query string, then runs the endpoint's query for the caller's account. */
  const withParams = <T>(result: ParamResult<T>, run: (p: T) => Promise<JsonValue>): Promise<ParamResult<JsonValue>> =>
    result.ok ? run(result.value).then((value) => ({ ok: true, value })) : Promise.resolve(result);

  const endpoints: Record<Exclude<Endpoint, 'export'> | 'budgets', Run> = {
    daily: (who, q, db) => withParams(parseParams(dailyParams, q), (p) => daily(db, who.accountId, now(), p.days)),
    summary: (who, q, db) => withParams(parseParams(summaryParams, q), () => summary(db, who.accountId, now())),
    'by-tag': (who, q, db) =>
      withParams(parseParams(byTagParams, q), (p) => byTag(db, who.accountId, now(), p.key, p.period)),
    events: (who, q, db) =>
      withParams(parseParams(eventsParams, q), (p) =>
        listEvents(db, who.accountId, p, { retentionVisibility, timescale, now: now() }),
      ),
    // CONTRACT §7: the stored reconciliation results (src/reconcile/endpoint.ts).
    reconciliation: (who, q, db) =>
      withParams(reconciliationParams(q, now()), (p) => reconciliationForAccount(db, who.accountId, p)),
    // Every plan: budgets and their alerts are in every plan (src/budget/analytics.ts).
    budgets: (who, _q, db) => accountBudgets(db, who.accountId, now()).then((value) => ({ ok: true, value })),
  };
  const everyPlan = new Set(['budgets']);
  // /analytics/export streams its rows (src/export) instead of answering one JSON value.
  const streamed = 'export';
  const routeList = [...Object.keys(endpoints), streamed].map((e) => `/analytics/${e}`).join(', ');

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const principal = await authenticator.authenticate(req.headers);
    if (!principal) {
      return sendError(
        res,
        401,
        'invalid_api_key',
        'a valid service key is required: send Authorization: Bearer mk_… or X-Meter-Key: mk_…',
      );
    }
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    const name = url.pathname.replace(/^\/analytics\//, '').replace(/\/$/, '');
    const run = Object.hasOwn(endpoints, name) ? endpoints[name as keyof typeof endpoints] : undefined;
    if (!run && name !== streamed)
      return sendError(res, 404, 'not_found', `no analytics route ${url.pathname}: try ${routeList}`);
    if (req.method !== 'GET') {
      return sendError(
        res,
        405,
        'method_not_allowed',
        `${req.method} is not allowed on ${url.pathname}: analytics endpoints answer GET`,
        { headers: { allow: 'GET' } },
      );
    }
    const included = await gate.endpoints(principal.plan);
    if (!included.has(name) && !everyPlan.has(name)) {
      const has = included.size
        ? `it includes ${[...included].map((e) => `/analytics/${e}`).join(', ')}`
        : 'it includes no analytics';
      return sendError(
        res,
        403,
        'plan_required',
        `the ${principal.plan} plan does not include ${url.pathname} (${has}); upgrade the account's plan to use it`,
      );
    }
    const db = reads ? reads.for(principal.accountId) : store;
    if (!run) return serveExport(db, principal, req, res, url.searchParams, now(), { slots: exports, logger });
    const result = await run(principal, url.searchParams, db);
    if (!result.ok) return sendError(res, 400, 'invalid_parameter', result.message);
    sendJson(res, 200, stringifyJson(result.value), { 'cache-control': 'no-store' });
  }

  return { name: 'analytics', routes: { '/analytics/': handle } };
}
