/**
 * `meter pricing reprice`: calls recorded without a price get one from their stored units once
 * a price exists, and the rollups with them, exactly; on PostgreSQL, the embedded store and
 * TimescaleDB (where the rollups are continuous aggregates: the touched days are refreshed).
 */
import { randomUUID } from 'node:crypto';
import { beforeAll, expect, it } from 'vitest';
import { summary } from '../../src/analytics/rollup-queries.js';
import { stringifyJson } from '../../src/money.js';
import { Pricer } from '../../src/pricing/index.js';
import { repriceUnpriced } from '../../src/pricing/reprice.js';
import type { Db } from '../../src/store/types.js';
import { makeEvent, seedEvents } from '../analytics/helpers/seed.js';
import { refreshAggregates } from '../../src/store/timescale/maintenance.js';
import { describeEachBackend } from '../helpers/stores.js';
import { tempFile } from './helpers.js';

const MODEL = 'acme/brand-new-70b';
const prices = () =>
  new Pricer({
    pricesFile: tempFile(
      'reprice.yaml',
      `providers:\n  together:\n    models:\n      ${MODEL}: { input_mtok: "0.7", output_mtok: "0.9", web_searches_kcount: 10 }\n`,
    ),
  });

describeEachBackend(
  'pricing reprice',
  (backend) => {
    let db: Db;
    const account = randomUUID();
    const unpriced = {
      cost: '0.00000000',
      unpriced: true,
      priceVersion: 'genai-prices@0.1.8',
      provider: 'together' as const,
      model: MODEL,
      requestedModel: MODEL,
    };

    beforeAll(async () => {
      db = await backend.open();
      await seedEvents(db, [
        makeEvent({
          accountId: account,
          time: '2026-11-03T10:00:00.000Z',
          ...unpriced,
          inputTokens: 1000,
          outputTokens: 2000,
          tags: { team: 'search' },
        }),
        makeEvent({
          accountId: account,
          time: '2026-11-04T23:59:59.999999Z',
          ...unpriced,
          inputTokens: 500,
          outputTokens: 100,
          units: { web_searches: 3 },
          tags: { team: 'ads', env: 'prod' },
        }),
        makeEvent({
          accountId: account,
          time: '2026-11-04T12:00:00.000Z',
          ...unpriced,
          model: 'acme/still-unknown',
          requestedModel: null,
        }),
        makeEvent({
          accountId: account,
          time: '2026-11-04T13:00:00.000Z',
          cost: '0.00002700',
          tags: { team: 'search' },
        }),
        // before --since: left alone
        makeEvent({ accountId: account, time: '2026-10-31T23:59:59.000Z', ...unpriced }),
      ]);
      // TimescaleDB: the days are materialized, so only a refresh can show the new costs.
      if (db.kind === 'timescale') await refreshAggregates(db, { from: new Date('2026-10-01T00:00:00Z') });
    }, 120_000);

    /** The summary as a client reads it (numbers as their exact text). */
    const summaryOf = async (now: Date) =>
      JSON.parse(stringifyJson(await summary(db, account, now)).replace(/:(-?[0-9][0-9.]*)/g, ':"$1"')) as Record<
        string,
        unknown
      >;
    const rollupsEqualRawSums = async () => {
      const daily = await db.query(
        `SELECT day::text, provider, model, spend::text, requests::text FROM usage_daily WHERE account_id = $1 ORDER BY 1, 2, 3`,
        [account],
      );
      const raw = await db.query(
        `SELECT (time AT TIME ZONE 'UTC')::date::text AS day, provider, model, sum(cost)::text AS spend, count(*)::text AS requests
      FROM usage_events WHERE account_id = $1 GROUP BY 1, 2, 3 ORDER BY 1, 2, 3`,
        [account],
      );
      expect(daily).toEqual(raw);
      const tags = await db.query(
        `SELECT day::text, tag_key, tag_value, spend::text FROM usage_tag_daily WHERE account_id = $1 ORDER BY 1, 2, 3`,
        [account],
      );
      const rawTags = await db.query(
        `SELECT (time AT TIME ZONE 'UTC')::date::text AS day, t.key AS tag_key, t.value AS tag_value, sum(cost)::text AS spend
      FROM usage_events CROSS JOIN LATERAL jsonb_each_text(tags) AS t(key, value) WHERE account_id = $1 GROUP BY 1, 2, 3 ORDER BY 1, 2, 3`,
        [account],
      );
      expect(tags).toEqual(rawTags);
    };

    it('prices the unpriced calls since the date from their stored units, and the rollups with them', async () => {
      const now = new Date('2026-11-15T00:00:00Z');
      expect(await summaryOf(now)).toMatchObject({ unpriced_requests: '3' });
      const pricer = prices();
      const logged: string[] = [];
      const report = await repriceUnpriced(db, pricer, new Date('2026-11-01T00:00:00Z'), {
        pageSize: 2,
        onChange: (c) => logged.push(`${c.provider} ${c.model} ${c.events} ${c.cost}`),
      });
      // 1000×0.7 + 2000×0.9 = 2500 µ$; 500×0.7 + 100×0.9 = 440 µ$ + 3 searches × $0.01 = 30440 µ$.
      expect(report).toMatchObject({
        examined: 3,
        repriced: 2,
        still_unpriced: 1,
        cost_added: '0.03294000',
        days: ['2026-11-03', '2026-11-04'],
        unpriced_models: [{ provider: 'together', model: 'acme/still-unknown', events: 1 }],
        price_version: pricer.priceVersion,
      });
      expect(logged).toEqual([`together ${MODEL} 2 0.03294000`]);
      const events = await db.query<{ cost: string; unpriced: boolean; price_version: string }>(
        `SELECT cost::text AS cost, unpriced, price_version FROM usage_events WHERE account_id = $1 AND model = $2 ORDER BY time`,
        [account, MODEL],
      );
      expect(events).toEqual([
        { cost: '0.00000000', unpriced: true, price_version: 'genai-prices@0.1.8' },
        { cost: '0.00250000', unpriced: false, price_version: pricer.priceVersion },
        { cost: '0.03044000', unpriced: false, price_version: pricer.priceVersion },
      ]);
      await rollupsEqualRawSums();
      expect(await summaryOf(now)).toMatchObject({ unpriced_requests: '1', spend: '0.032967' });

      // Again: nothing left to price, nothing changes.
      expect(await repriceUnpriced(db, pricer, new Date('2026-11-01T00:00:00Z'))).toMatchObject({
        examined: 1,
        repriced: 0,
        cost_added: '0.00000000',
        days: [],
      });
      await rollupsEqualRawSums();
    });
  },
  { timescale: true },
);
