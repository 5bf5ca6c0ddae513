/**
 * Reconciliation's named admin commands (src/admin/commands.ts spreads them in): the only store
 * operations `meter reconcile` needs, so it works through a daemon holding the embedded store.
 */
import { z } from 'zod';
import type { Db } from '../store/types.js';
import {
  addMapping,
  listMappings,
  meterFigures,
  readResults,
  recordFailedRun,
  removeMapping,
  saveRun,
  type ResultRow,
} from './store.js';
import { RECONCILABLE } from './types.js';

const provider = z.enum(RECONCILABLE);
const kind = z.enum(['project', 'workspace', 'api_key']);
const date = z.string().regex(/^\d{4}-\d{2}-\d{2}$/, 'a date YYYY-MM-DD');
const uuid = z.string().uuid();
const scope = z.union([z.literal(''), uuid]);
const id = z.string().min(1).max(256);
const count = z.string().regex(/^-?\d{1,19}$/);
const money = z.string().regex(/^-?\d{1,12}(\.\d{1,8})?$/);
const run = { provider, scope, from: date, to: date, startedAt: z.string().max(64) };
const row = z.strictObject({
  date,
  model: z.string().min(1).max(256),
  provider_requests: count.nullable(),
  provider_input_tokens: count,
  provider_cached_input_tokens: count,
  provider_output_tokens: count,
  provider_cost: money.nullable(),
  meter_requests: count,
  meter_input_tokens: count,
  meter_cached_input_tokens: count,
  meter_output_tokens: count,
  meter_cost: money,
  findings: z.array(z.unknown()).max(100),
});

const entry = <A extends z.ZodType, R>(args: A, run: (db: Db, a: z.output<A>) => Promise<R>) => ({ args, run });

export const reconcileAdminCommands = {
  'reconcile.mappings': entry(z.strictObject({ provider: provider.optional() }), (db, a) =>
    listMappings(db, a.provider),
  ),
  'reconcile.map': entry(z.strictObject({ provider, kind, id, account: z.string().min(1).max(256) }), (db, a) =>
    addMapping(db, a.provider, a.kind, a.id, a.account),
  ),
  'reconcile.unmap': entry(z.strictObject({ provider, kind, id }), (db, a) =>
    removeMapping(db, a.provider, a.kind, a.id),
  ),
  'reconcile.meter': entry(z.strictObject({ provider, from: date, to: date, accountId: uuid.optional() }), (db, a) =>
    meterFigures(db, a.provider, a.from, a.to, a.accountId),
  ),
  'reconcile.save': entry(z.strictObject({ ...run, rows: z.array(row).max(100_000) }), (db, a) =>
    saveRun(db, { ...a, rows: a.rows as ResultRow[] }),
  ),
  'reconcile.failed': entry(z.strictObject({ ...run, error: z.string().max(2000) }), (db, a) => recordFailedRun(db, a)),
  'reconcile.results': entry(z.strictObject({ provider, scope, from: date, to: date }), (db, a) =>
    readResults(db, a.provider, a.scope, a.from, a.to),
  ),
};
