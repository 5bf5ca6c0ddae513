/** The daily job runs on one sidecar of a fleet at a time: while another session holds the
 *  advisory lock, a sidecar's pass skips; once a run is complete, the next pass of any sidecar
 *  within the day does not run it again. */
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/log.js';
import { DaemonMetrics } from '../../src/metrics/registry.js';
import { reconcileJob } from '../../src/reconcile/job.js';
import { migrate } from '../../src/store/migrate.js';
import { openPostgres } from '../../src/store/postgres.js';
import { atFileEnd } from '../helpers/cleanup.js';
import { createTestDatabase, postgresUrl } from '../helpers/stores.js';
import { startFakeAdminApi } from './fake-admin-api.js';

const KEY = 'sk-admin-fleet-test';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.skipIf(!postgresUrl)('reconciliation across a fleet [postgres]', () => {
  it('skips while another sidecar holds the lock, and runs once a day', { timeout: 60_000 }, async () => {
    const url = await createTestDatabase();
    const [a, b] = [openPostgres(url), openPostgres(url)];
    atFileEnd(() => Promise.all([a.close(), b.close()]));
    await migrate(a);
    const fake = await startFakeAdminApi({ openaiKey: KEY });
    for (const path of [
      '/v1/organization/usage/completions',
      '/v1/organization/usage/embeddings',
      '/v1/organization/costs',
    ])
      fake.rows[path] = [];
    const config = loadConfig({
      METER_UPSTREAM_OPENAI: `${fake.url}/v1`,
      METER_OPENAI_ADMIN_KEY: KEY,
      DATABASE_URL: url,
    });
    const logger = createLogger('silent');
    const runs = async () => (await a.query<{ n: number }>('SELECT count(*)::int AS n FROM reconcile_runs'))[0]!.n;

    // Sidecar A holds the lock (its pass is under way): sidecar B's pass skips.
    let release!: () => void;
    const held = a.withAdvisoryLock('meter.reconcile', () => new Promise<void>((r) => (release = r)));
    await sleep(200);
    const jobB = reconcileJob(
      { config, logger, store: b, metrics: new DaemonMetrics() },
      { firstCheckMs: 0, checkEveryMs: 200 },
    );
    jobB.start?.();
    await sleep(600);
    expect(await runs()).toBe(0);
    expect(fake.requests).toHaveLength(0);
    release();
    await held;
    for (let i = 0; i < 50 && (await runs()) === 0; i++) await sleep(100);
    expect(await runs()).toBe(1);
    // Later passes of B, and a pass of sidecar A, find today's run complete: no second run.
    const jobA = reconcileJob(
      { config, logger, store: a, metrics: new DaemonMetrics() },
      { firstCheckMs: 0, checkEveryMs: 200 },
    );
    jobA.start?.();
    await sleep(800);
    await Promise.all([jobA.stop?.(), jobB.stop?.()]);
    expect(await runs()).toBe(1);
  });
});
