/**
 * The daily reconciliation in the daemon (when an admin key is set): one sidecar of a fleet at a
 * time (an advisory lock; the others skip), at most once a day per provider (the last complete
 * run decides, so a restart or a second sidecar does not run it again). It reconciles the month
 * so far (the previous month too during the first 3 days, to settle the month's end) for the
 * organisation and for every mapped account, stores the results, and sends the drift alert.
 */
import { PeriodicTask } from '../periodic.js';
import type { Logger } from '../log.js';
import type { Component, DaemonContext } from '../component.js';
import type { Db } from '../store/types.js';
import { fireDrift, monthDrift, passes } from './alert.js';
import type { RetryOptions } from './http.js';
import { localStore } from '../admin/client.js';
import { firstIncompleteDay, runReconciliation, type RunOptions } from './run.js';
import { lastCompleteRun, listMappings } from './store.js';
import { RECONCILABLE, type ReconcileProvider } from './types.js';

export const DAY_MS = 86_400_000;

export interface JobOptions {
  /** How often the job looks whether a run is due (the run itself is daily). */
  checkEveryMs: number;
  /** A run is due when the last complete one started this long ago. */
  everyMs: number;
  /** The first look after start. */
  firstCheckMs: number;
  retry?: Partial<RetryOptions>;
  now?: () => Date;
}

export const DEFAULT_JOB: JobOptions = { checkEveryMs: 3_600_000, everyMs: 23 * 3_600_000, firstCheckMs: 60_000 };

const month = (d: Date) => d.toISOString().slice(0, 7);

/** The days a daily run covers: this month so far, from the previous month's first day during the first 3 days. */
export function dailyRange(now: Date): { from: string; to: string } {
  const from = `${month(new Date(now.getTime() - 3 * DAY_MS))}-01`;
  return { from, to: now.toISOString().slice(0, 10) };
}

/** One pass: every provider with a key whose run is due. Exported for tests. */
export async function reconcileDue(
  db: Db,
  config: RunOptions['config'] & { reconcileAlertPct: number },
  logger: Logger,
  opts: Pick<JobOptions, 'everyMs' | 'retry' | 'now'>,
): Promise<void> {
  const now = opts.now?.() ?? new Date();
  for (const provider of RECONCILABLE) {
    if (!config.adminKeys[provider]) continue;
    const last = await lastCompleteRun(db, provider, '');
    if (last && now.getTime() - Date.parse(last) < opts.everyMs) continue;
    const range = dailyRange(now);
    const mappings = await listMappings(db, provider);
    const accounts = [...new Map(mappings.map((m) => [m.account_id, m.account])).entries()];
    const scopes: { scope: string; account?: string }[] = [
      { scope: '' },
      ...accounts.map(([id, name]) => ({ scope: id, account: name })),
    ];
    for (const s of scopes) {
      try {
        const r = await runReconciliation(localStore(db), {
          provider,
          account: s.account,
          ...range,
          now,
          config,
          retry: opts.retry,
        });
        logger.info(
          {
            provider,
            account: s.account ?? null,
            from: range.from,
            to: range.to,
            diff_pct: r.totals.diff_pct,
            findings: r.findings.length,
          },
          'reconciliation stored',
        );
      } catch (err) {
        logger.warn(
          { provider, account: s.account ?? null, err: { message: (err as Error).message } },
          'reconciliation failed; will retry',
        );
        continue;
      }
      await alertIfDrifting(db, provider, s.scope, config.reconcileAlertPct, now, logger);
    }
  }
}

async function alertIfDrifting(
  db: Db,
  provider: ReconcileProvider,
  scope: string,
  thresholdPct: number,
  now: Date,
  logger: Logger,
): Promise<void> {
  const settled = firstIncompleteDay(now);
  for (const m of new Set([month(new Date(now.getTime() - 3 * DAY_MS)), month(now)])) {
    const drift = await monthDrift(db, provider, scope, m, settled);
    if (!drift || !passes(drift, thresholdPct)) continue;
    const { fired, queued } = await fireDrift(db, { provider, scope, month: m, drift, thresholdPct, now });
    if (fired) logger.warn({ provider, month: m, diff_pct: drift.diff_pct, queued }, 'reconciliation drift alert sent');
  }
}

/** /metrics: the month's organisation-wide difference per provider (labels: provider only). */
function registerMetrics(ctx: DaemonContext, providers: ReconcileProvider[], now: () => Date): void {
  let cache: { at: number; rows: Map<ReconcileProvider, { pct: number; usd: number; last: number }> } | undefined;
  const read = async () => {
    if (cache && Date.now() - cache.at < 60_000) return cache.rows;
    const rows = new Map<ReconcileProvider, { pct: number; usd: number; last: number }>();
    for (const p of providers) {
      const drift = await monthDrift(ctx.store, p, '', month(now()), firstIncompleteDay(now()));
      const last = await lastCompleteRun(ctx.store, p, '');
      rows.set(p, {
        pct: drift?.diff_pct === null || !drift ? NaN : Number(drift.diff_pct),
        usd: drift ? Number(drift.diff_usd) / 1e8 : NaN,
        last: last ? Date.parse(last) / 1000 : NaN,
      });
    }
    cache = { at: Date.now(), rows };
    return rows;
  };
  const gauge = (name: string, help: string, pick: (r: { pct: number; usd: number; last: number }) => number) =>
    ctx.metrics.gauge(name, help, ['provider'], async (emit) => {
      const rows = await read().catch(() => new Map());
      for (const [provider, r] of rows) if (!Number.isNaN(pick(r))) emit({ provider }, pick(r));
    });
  gauge(
    'meter_reconciliation_diff_pct',
    "This month's settled difference, meter minus the provider's report, in percent of the provider's",
    (r) => r.pct,
  );
  gauge(
    'meter_reconciliation_diff_usd',
    "This month's settled difference, meter minus the provider's report, in USD",
    (r) => r.usd,
  );
  gauge(
    'meter_reconciliation_last_success_seconds',
    'When the last complete reconciliation run started (Unix seconds)',
    (r) => r.last,
  );
}

export function reconcileJob(ctx: DaemonContext, opts: Partial<JobOptions> = {}): Component {
  const o = { ...DEFAULT_JOB, ...opts };
  const now = o.now ?? (() => new Date());
  const providers = RECONCILABLE.filter((p) => ctx.config.adminKeys[p]);
  const logger = ctx.logger.child({ component: 'reconcile' });
  const work = () => reconcileDue(ctx.store, ctx.config, logger, { ...o, now });
  // PostgreSQL: one sidecar of the fleet (the others skip). The embedded store has one process
  // (its lock file), and its "lock" holds the single connection, which the work itself needs.
  const pass = () => (ctx.store.kind === 'embedded' ? work() : ctx.store.tryAdvisoryLock('meter.reconcile', work));
  let first = true;
  const loop = new PeriodicTask(pass, {
    what: 'reconciliation pass',
    logger,
    pauseMs: () => (first ? ((first = false), o.firstCheckMs) : o.checkEveryMs),
  });
  if (providers.length > 0) registerMetrics(ctx, providers, now);
  return {
    name: 'reconciliation',
    start() {
      if (providers.length > 0) void loop.start('after-pause');
    },
    stop: () => loop.stop(),
  };
}
