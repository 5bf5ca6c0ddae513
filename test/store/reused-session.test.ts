import { expect, it } from 'vitest';
import { tempDirAtFileEnd } from '../helpers/cleanup.js';
import { closeOnEngine, openOnEngine, timescaleDatabase } from '../helpers/timescale.js';

/**
 * A session that outlives meter's connection (a session pooler hands the same server session to
 * the next client; the TimescaleDB test engine serves every connection on one session) still
 * holds meter's named statements. A sidecar that connects next must not fail with 42P05
 * "prepared statement already exists".
 */
it('a sidecar on a session that still holds meter_quota_counts runs the statement again', async () => {
  const url = await timescaleDatabase();
  const config = { databaseUrl: url, dataDir: tempDirAtFileEnd() };
  const sql = 'SELECT count(*)::int AS n FROM usage_daily';

  const first = await openOnEngine(config);
  expect(await first.query(sql, [], { name: 'meter_quota_counts' })).toEqual([{ n: 0 }]);
  await closeOnEngine(first, url);

  const second = await openOnEngine(config); // the same session, the statement still prepared in it
  try {
    expect(await second.query(sql, [], { name: 'meter_quota_counts' })).toEqual([{ n: 0 }]);
    // meter's own names only: a statement another client prepared in the session stays
    await second.exec('PREPARE someone_elses AS SELECT 1');
    await closeOnEngine(second, url);
    const third = await openOnEngine(config);
    try {
      const names = await third.query<{ name: string }>('SELECT name FROM pg_prepared_statements ORDER BY name');
      expect(names.map((r) => r.name)).toEqual(['someone_elses']);
    } finally {
      await third.close();
    }
  } catch (err) {
    await second.close().catch(() => {});
    throw err;
  }
}, 120_000);
