import { beforeAll, expect, it } from 'vitest';
import type { UsageEvent } from '../../src/metering/event.js';
import { uuidv7 } from '../../src/metering/ids.js';
import { insertBatch } from '../../src/store/event-batch.js';
import { migrate } from '../../src/store/migrate.js';
import { openPostgres } from '../../src/store/postgres.js';
import type { Db } from '../../src/store/types.js';
import { atFileEnd } from '../helpers/cleanup.js';
import { createTestDatabase, describeEachBackend, postgresUrl } from '../helpers/stores.js';
import { ACCOUNTS, makeEvents } from '../metering/events.js';

const [ACME, OTHER] = ACCOUNTS as [string, string];
const TIME = Date.UTC(2026, 2, 2, 10);

/** A download of batch results: one claimed event per model, as the metering builds them. */
function download(account: string, file: string, at = TIME): UsageEvent[] {
  return [
    ['gpt-4o-mini', '0.00012000', 1200],
    ['gpt-4.1-mini', '0.00048640', 2000],
  ].map(
    ([model, cost, input], i) =>
      makeEvents(1, i + 1, {
        id: uuidv7(at),
        time: new Date(at).toISOString(),
        accountId: account,
        provider: 'openai',
        model: model as string,
        requestedModel: model as string,
        cost: cost as string,
        inputTokens: input as number,
        outputTokens: 100,
        usageSource: 'provider',
        serviceTier: 'batch',
        units: { input_audio_tokens: 1 },
        providerCostTicks: '5',
        tags: { team: 'batch' },
        claim: `openai:${file}:${model}`,
      })[0]!,
  );
}

async function charged(db: Db, account: string) {
  return db.query<{ model: string; spend: string; requests: number; input: number }>(
    `SELECT model, spend::text AS spend, requests::int AS requests, input_tokens::int AS input FROM usage_daily
      WHERE account_id = $1 AND provider = 'openai' ORDER BY model`,
    [account],
  );
}

async function eventsOf(db: Db, ids: string[]) {
  return db.query<Record<string, unknown>>(
    `SELECT model, cost::text AS cost, input_tokens::int AS input, usage_source, units, provider_cost_ticks::text AS ticks, service_tier
       FROM usage_events WHERE event_id = ANY($1::uuid[]) ORDER BY model`,
    [ids],
  );
}

const SPEND = [
  { model: 'gpt-4.1-mini', spend: '0.00048640', requests: 1, input: 2000 },
  { model: 'gpt-4o-mini', spend: '0.00012000', requests: 1, input: 1200 },
];
const UNCHARGED = {
  cost: '0.00000000',
  input: 0,
  usage_source: 'none',
  units: null,
  ticks: null,
  service_tier: 'batch',
};

describeEachBackend(
  'claims of batch results',
  (backend) => {
    let db: Db;
    const first = download(ACME, 'file-A');
    beforeAll(async () => {
      db = await backend.open();
    }, 120_000); // a WASM start (embedded, TimescaleDB engine)

    it('the first download is charged and claims its keys; a replayed batch changes nothing', async () => {
      const plain = makeEvents(1, 9, { accountId: ACME, time: new Date(TIME).toISOString(), provider: 'anthropic' }); // no claim: as always
      expect(await insertBatch(db, [...first, ...plain])).toEqual({ inserted: 3 });
      expect(await charged(db, ACME)).toEqual(SPEND);
      expect(
        await db.query(`SELECT claim, event_id::text AS event_id, claimed_at FROM usage_claims ORDER BY claim`),
      ).toEqual([
        { claim: 'openai:file-A:gpt-4.1-mini', event_id: first[1]!.id, claimed_at: new Date(TIME) },
        { claim: 'openai:file-A:gpt-4o-mini', event_id: first[0]!.id, claimed_at: new Date(TIME) },
      ]);
      expect(await insertBatch(db, first)).toEqual({ inserted: 0 });
      expect(await charged(db, ACME)).toEqual(SPEND);
      expect(
        (
          await eventsOf(
            db,
            first.map((e) => e.id),
          )
        )[0],
      ).toMatchObject({ cost: '0.00048640', usage_source: 'provider', ticks: '5' });
    });

    it('a second download is recorded as calls that used nothing; another account is charged on its own', async () => {
      const again = download(ACME, 'file-A', TIME + 60_000);
      expect(await insertBatch(db, again)).toEqual({ inserted: 2 });
      expect(
        await eventsOf(
          db,
          again.map((e) => e.id),
        ),
      ).toEqual([
        { model: 'gpt-4.1-mini', ...UNCHARGED },
        { model: 'gpt-4o-mini', ...UNCHARGED },
      ]);
      expect(await charged(db, ACME)).toEqual(SPEND.map((r) => ({ ...r, requests: 2 })));
      // the same file downloaded by another account (its own key): its own charge
      await insertBatch(db, download(OTHER, 'file-A'));
      expect(await charged(db, OTHER)).toEqual(SPEND);
    });

    it('two downloads in one batch: the earlier one is charged', async () => {
      const a = download(ACME, 'file-B', TIME + 1000);
      const b = download(ACME, 'file-B', TIME + 2000);
      const before = await charged(db, ACME);
      expect(await insertBatch(db, [...b, ...a])).toEqual({ inserted: 4 });
      expect(
        (
          await eventsOf(
            db,
            a.map((e) => e.id),
          )
        ).map((r) => r.cost),
      ).toEqual(['0.00048640', '0.00012000']);
      expect(
        (
          await eventsOf(
            db,
            b.map((e) => e.id),
          )
        ).map((r) => r.cost),
      ).toEqual(['0.00000000', '0.00000000']);
      // each model: one more charge (a), two more requests (a and b), a's input only
      expect(await charged(db, ACME)).toEqual(
        before.map((r, i) => ({
          ...r,
          spend: i === 0 ? '0.00097280' : '0.00024000',
          requests: r.requests + 2,
          input: r.input + SPEND[i]!.input,
        })),
      );
    });

    // Two sidecars need two connections to one server: PostgreSQL only (the embedded store is one
    // process's, the TimescaleDB test engine serves one session).
    if (backend.name === 'postgres')
      it('two sidecars writing the same results at once: one charge', async () => {
        const url = await createTestDatabase();
        const a = openPostgres(url);
        const b = openPostgres(url);
        atFileEnd(() => Promise.all([a.close(), b.close()]));
        await migrate(a);
        for (let round = 0; round < 5; round++) {
          const file = `file-R${round}`;
          const [x, y] = [download(ACME, file, TIME + round), download(ACME, file, TIME + round)];
          await Promise.all([insertBatch(a, x), insertBatch(b, y)]);
          const costs = (
            await eventsOf(
              a,
              [...x, ...y].map((e) => e.id),
            )
          )
            .map((r) => r.cost)
            .sort();
          expect(costs).toEqual(['0.00000000', '0.00000000', '0.00012000', '0.00048640']);
        }
        // five charges of each model, ten requests
        expect(await charged(a, ACME)).toEqual(
          SPEND.map((r) => ({
            ...r,
            spend: r.model === 'gpt-4o-mini' ? '0.00060000' : '0.00243200',
            requests: 10,
            input: r.input * 5,
          })),
        );
      }, 60_000);
  },
  { timescale: true },
);

it.skipIf(!postgresUrl)(
  'migrates a database written before claims: older events and spool lines without a claim are charged',
  async () => {
    const db = openPostgres(await createTestDatabase());
    atFileEnd(() => db.close());
    await migrate(db);
    const old = makeEvents(3, 5, { accountId: ACME });
    const lines = old.map((e) => JSON.stringify(e)); // an older version's lines: no `claim` key
    expect(lines.every((l) => !l.includes('"claim"'))).toBe(true);
    expect(await insertBatch(db, old)).toEqual({ inserted: 3 });
    expect((await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM usage_claims`))[0]!.n).toBe(0);
    expect(
      (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM usage_events WHERE usage_source = 'provider'`))[0]!
        .n,
    ).toBe(3);
  },
);
