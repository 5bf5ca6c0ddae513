import type { Db } from './types.js';

/** A Db that runs statements through a live daemon's admin API: the CLI's way in when the
 *  embedded store is locked by that daemon. Transactions cannot span HTTP calls, so commands
 *  that may run this way use single statements. */
export function openRemote(adminUrl: string, token: string): Db {
  const call = async (path: string, body: unknown) => {
    const { request } = await import('undici');
    const res = await request(`${adminUrl}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify(body),
    });
    const json = (await res.body.json()) as { rows?: unknown[]; error?: { message: string } };
    if (res.statusCode !== 200) throw new Error(json.error?.message ?? `daemon answered ${res.statusCode}`);
    return json.rows ?? [];
  };
  return {
    kind: 'embedded',
    query: async <T>(sql: string, params?: unknown[]) => (await call('/admin/query', { sql, params })) as T[],
    async exec(sql) {
      await call('/admin/query', { sql });
    },
    transaction: () => Promise.reject(new Error('transactions are not available through the daemon admin API')),
    withAdvisoryLock: () => Promise.reject(new Error('locks are not available through the daemon admin API')),
    tryAdvisoryLock: () => Promise.reject(new Error('locks are not available through the daemon admin API')),
    async ping() {
      try {
        await call('/admin/query', { sql: 'SELECT 1' });
        return true;
      } catch {
        return false;
      }
    },
    async close() {},
  };
}
