import { describe, expect, it } from 'vitest';
import { createAccount } from '../../src/auth/accounts.js';
import { createKey } from '../../src/auth/keys.js';
import { setBudget } from '../../src/budget/admin.js';
import { migrate } from '../../src/store/migrate.js';
import { openPostgres } from '../../src/store/postgres.js';
import { atFileEnd } from '../helpers/cleanup.js';
import { answerChat, eventually, sleep, startFullDaemon } from '../helpers/fleet.js';
import { createTestDatabase, postgresUrl } from '../helpers/stores.js';
import { startTcpProxy } from '../helpers/tcp-proxy.js';
import { startFakeUpstream } from '../helpers/upstreams.js';

const LEASE_MS = 3_000;

// A sidecar cut from the database mid-lease (docs/fleet.md "While the database is away"): the
// hard cap admits on the slice it holds until its lease would lapse, then refuses (closed); the
// quota and the rate limits admit as though the sidecar were alone (open); both recover when the
// database answers again, and every call answered meanwhile is written.
describe.skipIf(!postgresUrl)('a sidecar cut from the database mid-lease', () => {
  it('the hard cap closes after the lease, the quota stays open, both recover when the database returns', async () => {
    const url = await createTestDatabase();
    const db = openPostgres(url);
    atFileEnd(() => db.close());
    await migrate(db);
    await db.query(`UPDATE plans SET monthly_call_quota = 1000 WHERE name = 'free'`);
    await createAccount(db, 'capped', 'pro');
    await createAccount(db, 'counted', 'free');
    const capped = (await createKey(db, 'capped')).key;
    const counted = (await createKey(db, 'counted')).key;
    await setBudget(db, 'capped', '100', true);
    const upstream = await startFakeUpstream();
    answerChat(upstream, { prompt: 100, completion: 400 });
    const relay = await startTcpProxy(url);
    atFileEnd(() => relay.close());
    const env = { METER_FLEET_LEASE_MS: String(LEASE_MS), METER_FLEET_SYNC_MS: '100' };
    const cut = await startFullDaemon(relay.urlFor(url), upstream, env);
    const post = (key: string, daemon = cut) =>
      fetch(`${daemon.url}/proxy/openai/v1/chat/completions`, {
        method: 'POST',
        headers: { 'x-meter-key': key, authorization: 'Bearer sk-provider', 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'gpt-4o', max_tokens: 50, messages: [{ role: 'user', content: 'hi' }] }),
      });
    // Calls in a row: the sidecar leases slices of the cap and the quota.
    for (let i = 0; i < 5; i++) {
      expect((await post(capped)).status).toBe(200);
      expect((await post(counted)).status).toBe(200);
    }

    await relay.down();
    const cutAt = Date.now();
    // Within its lease, calls go on against the slices held (while they last).
    expect((await post(counted)).status).toBe(200);
    // Once the lease would have lapsed, the hard cap cannot confirm room: 402, saying why.
    await sleep(LEASE_MS);
    const refused = await post(capped);
    expect(refused.status).toBe(402);
    expect(((await refused.json()) as { error: { message: string } }).error.message).toContain(
      'the database is unreachable',
    );
    // The quota fails open: the sidecar admits as though it were alone.
    for (let i = 0; i < 3; i++) expect((await post(counted)).status).toBe(200);
    expect(Date.now() - cutAt).toBeGreaterThanOrEqual(LEASE_MS);

    await relay.up();
    const ms = await eventually(async () => (await post(capped)).status === 200, 15_000, 'the hard cap recovers');
    console.info(`fleet: the hard cap admitted again ${ms} ms after the database returned`);
    // Every call the sidecar answered is written once the database is back.
    await eventually(
      async () => {
        const [row] = await db.query<{ n: string }>(`SELECT count(*)::text AS n FROM usage_events`);
        return Number(row!.n) === upstream.requests.length;
      },
      15_000,
      'every answered call written',
    );
  }, 60_000);
});
