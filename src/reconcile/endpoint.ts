/**
 * GET /analytics/reconciliation?provider=&month=YYYY-MM: the stored daily results (CONTRACT §7)
 * for the caller's account. An account sees the results of its own mapped projects, workspaces
 * or keys; the organisation's results (meter's side summed over every account) only when it is
 * the store's one account, so no account reads another's spend.
 */
import type { ParamResult } from '../http.js';
import { money, RawNumber, type JsonValue } from '../money.js';
import type { Queryable } from '../store/types.js';
import { storedJson } from './json.js';
import { readResults } from './store.js';
import { RECONCILABLE, type ReconcileProvider } from './types.js';

export interface ReconciliationParams {
  provider: ReconcileProvider;
  month: string;
}

export function reconciliationParams(q: URLSearchParams, now: Date): ParamResult<ReconciliationParams> {
  for (const name of new Set(q.keys())) {
    if (name !== 'provider' && name !== 'month')
      return {
        ok: false,
        param: name,
        message: `unknown parameter ${name}: /analytics/reconciliation takes provider and month`,
      };
    if (q.getAll(name).length > 1) return { ok: false, param: name, message: `${name} is given more than once` };
  }
  const provider = q.get('provider');
  if (!RECONCILABLE.includes(provider as ReconcileProvider))
    return {
      ok: false,
      param: 'provider',
      message: `provider must be one of ${RECONCILABLE.join(', ')}, got ${JSON.stringify(provider)}`,
    };
  const month = q.get('month') ?? now.toISOString().slice(0, 7);
  if (!/^\d{4}-(0[1-9]|1[0-2])$/.test(month))
    return { ok: false, param: 'month', message: `month must be a month YYYY-MM, got ${JSON.stringify(month)}` };
  return { ok: true, value: { provider: provider as ReconcileProvider, month } };
}

const nextMonth = (month: string) => {
  const [y, m] = month.split('-').map(Number) as [number, number];
  return m === 12 ? `${y + 1}-01` : `${y}-${String(m + 1).padStart(2, '0')}`;
};

/** Budget-style JSON (exact numbers) to the analytics writer's. */
function toApi(v: JsonValue): JsonValue {
  if (v instanceof RawNumber) return money(v.text);
  if (Array.isArray(v)) return v.map(toApi);
  if (v !== null && typeof v === 'object')
    return Object.fromEntries(
      Object.entries(v)
        .filter(([, x]) => x !== undefined)
        .map(([k, x]) => [k, toApi(x as JsonValue)]),
    );
  return v;
}

export async function reconciliationForAccount(
  db: Queryable,
  accountId: string,
  p: ReconciliationParams,
): Promise<JsonValue> {
  const [row] = await db.query<{ mapped: boolean; accounts: number }>(
    `SELECT EXISTS (SELECT 1 FROM reconcile_mappings WHERE provider = $1 AND account_id = $2::uuid) AS mapped,
            (SELECT count(*)::int FROM accounts) AS accounts`,
    [p.provider, accountId],
  );
  const organisation = !row?.mapped && row?.accounts === 1;
  const rows = await readResults(
    db,
    p.provider,
    organisation ? '' : accountId,
    `${p.month}-01`,
    `${nextMonth(p.month)}-01`,
  );
  return toApi(storedJson(p.provider, p.month, organisation ? 'organisation' : 'account', rows));
}
