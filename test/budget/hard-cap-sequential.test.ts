import Anthropic from '@anthropic-ai/sdk';
import { expect, it } from 'vitest';
import { createAccount } from '../../src/auth/accounts.js';
import { createKey } from '../../src/auth/keys.js';
import { setBudget } from '../../src/budget/admin.js';
import { toUnits } from '../../src/money.js';
import { openEmbedded } from '../../src/store/embedded.js';
import { migrate } from '../../src/store/index.js';
import { openPostgres } from '../../src/store/postgres.js';
import type { Db } from '../../src/store/types.js';
import { atFileEnd } from '../helpers/cleanup.js';
import { anthropicVia, answerMessages, eventually, sleep, startFullDaemon } from '../helpers/fleet.js';
import { createTestDatabase, describeEachBackend, tempDir } from '../helpers/stores.js';
import { startFakeUpstream } from '../helpers/upstreams.js';

// claude-sonnet-4: $3 / MTok input, $15 / MTok output. Each call uses 100 + 160 tokens:
// $0.0003 + $0.0024 = $0.0027, 27% of the $0.01 budget; its worst case is its 200 max_tokens of
// output and its ~100-byte body at 3 bytes a token: $0.0030 + $0.0001. Calls 1–3 leave spend at
// 81%; call 4 is admitted too ($0.0019 is left: any room admits, CONTRACT §6 "Hard cap") and
// takes spend to 108%, so the 100% alert fires; every call after it is refused.
const BUDGET = '0.01';
const COST = '0.0027';
const FLUSH_MS = 150;
/** Pauses between calls: shorter than the flush interval (the previous call's cost is still
 *  unwritten, counted by the sidecar itself) and longer (written and re-read as fleet spend). */
const SPACINGS = { back_to_back: 0, short: FLUSH_MS / 3, long: FLUSH_MS * 2.5 };

const ask = (client: Anthropic) =>
  client.messages.create({
    model: 'claude-sonnet-4-20250514',
    max_tokens: 200,
    messages: [{ role: 'user', content: 'hello' }],
  });

/** CONTRACT §6 on one sidecar: with nothing in flight, a call is admitted exactly when recorded
 *  spend plus this sidecar's unwritten costs is below the amount. */
describeEachBackend('the hard cap, calls one after another', (backend) => {
  it('admits calls while spend is below the amount, fires 100%, then answers 402', async () => {
    const upstream = await startFakeUpstream();
    answerMessages(upstream, { input: 100, output: 160 });
    const dataDir = tempDir();
    const databaseUrl = backend.name === 'postgres' ? await createTestDatabase() : undefined;

    // Accounts, keys and budgets first (the embedded store is the daemon's once it runs).
    const setupDb: Db = databaseUrl ? openPostgres(databaseUrl) : await openEmbedded(dataDir);
    await migrate(setupDb);
    const keys: Record<string, string> = {};
    for (const name of Object.keys(SPACINGS)) {
      await createAccount(setupDb, name, 'pro');
      keys[name] = (await createKey(setupDb, name)).key;
      await setBudget(setupDb, name, BUDGET, true);
    }
    await setupDb.close();

    const daemon = await startFullDaemon(databaseUrl, upstream, {
      METER_DATA_DIR: dataDir,
      METER_FLUSH_INTERVAL_MS: String(FLUSH_MS),
    });
    // Checks read the daemon's own store when it holds the embedded one (its admin API runs
    // named commands only, no SQL of ours).
    const db = databaseUrl ? openPostgres(databaseUrl) : daemon.store;
    if (databaseUrl) atFileEnd(() => db.close());

    // The three accounts run side by side; each one's calls are strictly sequential.
    await Promise.all(
      Object.entries(SPACINGS).map(async ([name, pause]) => {
        const client = anthropicVia(daemon, keys[name]!);
        const outcomes: (number | 'ok')[] = [];
        for (let i = 0; i < 6; i++) {
          if (i > 0) await sleep(pause);
          try {
            await ask(client);
            outcomes.push('ok');
          } catch (err) {
            expect(err).toBeInstanceOf(Anthropic.APIError);
            const e = err as InstanceType<typeof Anthropic.APIError>;
            expect(e.error).toMatchObject({ type: 'error', error: { type: 'budget_exceeded' } });
            expect(e.message).toContain(`monthly budget of $${BUDGET} for account ${name} is reached`);
            outcomes.push(e.status!);
          }
        }
        expect({ name, outcomes }).toEqual({ name, outcomes: ['ok', 'ok', 'ok', 'ok', 402, 402] });
      }),
    );
    expect(upstream.requests).toHaveLength(3 * 4); // refused calls never reach the provider

    // Spend stands at 108%: every level fired for each account.
    let last: unknown;
    await eventually(
      async () => {
        const rows = await db.query<{ name: string; spend: string; fired: number[] }>(
          `SELECT a.name, coalesce((SELECT sum(spend) FROM usage_daily u WHERE u.account_id = a.id), 0)::text AS spend,
                coalesce((SELECT array_agg(level::int ORDER BY level) FROM budget_levels_fired f JOIN budgets b ON b.id = f.budget_id
                          WHERE b.account_id = a.id), '{}') AS fired
           FROM accounts a`,
        );
        last = rows;
        return (
          rows.length === 3 &&
          rows.every((r) => toUnits(r.spend) === 4n * toUnits(COST) && r.fired.join() === '50,80,100')
        );
      },
      10_000,
      'spend of 4 calls recorded and every level fired on every account',
    ).catch((e: Error) => {
      throw new Error(`${e.message}: ${JSON.stringify(last)}`);
    });
  }, 120_000); // the embedded store starts twice, slowly on a busy machine
});
