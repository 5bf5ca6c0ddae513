import { beforeAll, describe, expect, it } from 'vitest';
import { createAccount } from '../../src/auth/accounts.js';
import { createKey } from '../../src/auth/keys.js';
import { setBudget } from '../../src/budget/admin.js';
import { formatUnits, toUnits } from '../../src/money.js';
import { migrate } from '../../src/store/migrate.js';
import { openPostgres } from '../../src/store/postgres.js';
import type { Db } from '../../src/store/types.js';
import { atFileEnd, tempDirAtFileEnd } from '../helpers/cleanup.js';
import { ensureBuilt, spawnDaemon, type RunningDaemon } from '../helpers/daemon.js';
import { eventually, sleep } from '../helpers/fleet.js';
import { createTestDatabase, postgresUrl } from '../helpers/stores.js';
import { startFakeUpstream, type FakeUpstream } from '../helpers/upstreams.js';

// Three `meter start` processes on one PostgreSQL database (CONTRACT §6 "The fleet"). Every call
// is the same request: gpt-4o ($2.50 / MTok in, $10 / MTok out), max_tokens 500, so its worst
// case is known: ⌈bytes ÷ 3⌉ input tokens and 500 output tokens. It really uses 100 + 400.
const SIDECARS = 3;
const CALLS = 64;
/** Each limit is set so that exactly this many calls fit at once. */
const FIT = 20;
const LEASE_MS = 3_000;
const BODY = JSON.stringify({ model: 'gpt-4o', max_tokens: 500, messages: [{ role: 'user', content: 'hello' }] });
const WORST_TOKENS = Math.ceil(Buffer.byteLength(BODY) / 3) + 500;
const WORST = toUnits(String(Math.ceil(Buffer.byteLength(BODY) / 3) * 2.5 + 500 * 10)) / 1_000_000n;
const ACTUAL = toUnits('0.00425');

let db: Db;
let upstream: FakeUpstream;
let daemons: RunningDaemon[];
const keys: Record<string, string> = {};

/** A chat completion with the fixed usage, answered once `gate` opens. */
function answerAfter(gate: Promise<unknown>): void {
  upstream.respond(async (_req, res) => {
    await gate;
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        id: 'chatcmpl-1',
        object: 'chat.completion',
        created: 1763726400,
        model: 'gpt-4o-2024-08-06',
        choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }],
        usage: { prompt_tokens: 100, completion_tokens: 400, total_tokens: 500 },
      }),
    );
  });
}

const post = (daemon: RunningDaemon, key: string) =>
  fetch(`${daemon.url}/proxy/openai/v1/chat/completions`, {
    method: 'POST',
    headers: { 'x-meter-key': key, authorization: 'Bearer sk-provider', 'content-type': 'application/json' },
    body: BODY,
  });

interface Answer {
  status: number;
  code: string | undefined;
  remaining: string | null;
}
const answer = async (res: Response): Promise<Answer> => ({
  status: res.status,
  code: ((await res.json()) as { error?: { code?: string } }).error?.code,
  remaining: res.headers.get('ratelimit-remaining'),
});

/**
 * CALLS calls at once, spread over the sidecars. The provider holds every admitted call until
 * every call is decided (admitted ones reached it, refused ones were answered), so every
 * decision is taken while all admitted calls are in flight with their worst case reserved:
 * exactly FIT fit, and a refusal while the fleet had room shows as fewer.
 */
async function burst(account: string): Promise<Answer[]> {
  let open!: () => void;
  const gate = new Promise<void>((r) => (open = r));
  answerAfter(gate);
  const before = upstream.requests.length;
  let refused = 0;
  const calls = Array.from({ length: CALLS }, async (_, i) => {
    const res = await post(daemons[i % SIDECARS]!, keys[account]!);
    if (res.status !== 200) refused++;
    return answer(res);
  });
  await eventually(
    async () => upstream.requests.length - before + refused === CALLS,
    30_000,
    'every call admitted or refused',
  );
  open();
  return Promise.all(calls);
}

const written = async (account: string) =>
  (
    await db.query<{ spend: string; requests: string }>(
      `SELECT COALESCE(sum(d.spend), 0)::text AS spend, COALESCE(sum(d.requests), 0)::text AS requests
         FROM usage_daily d JOIN accounts a ON a.id = d.account_id WHERE a.name = $1`,
      [account],
    )
  )[0]!;

describe.skipIf(!postgresUrl)('limits on a fleet of three sidecar processes', () => {
  beforeAll(async () => {
    await ensureBuilt();
    const url = await createTestDatabase();
    db = openPostgres(url);
    atFileEnd(() => db.close());
    await migrate(db);
    // The Free plan's quota is the one under test there, not its calls a minute.
    await db.query(`UPDATE plans SET monthly_call_quota = ${FIT}, rate_limit_per_minute = 1000 WHERE name = 'free'`);
    for (const [account, plan] of [
      ['capped', 'pro'],
      ['quota', 'free'],
      ['calls', 'pro'],
      ['tokens', 'pro'],
      ['killed', 'pro'],
    ] as const) {
      await createAccount(db, account, plan);
      const { id, key } = await createKey(db, account);
      keys[account] = key;
      if (account === 'calls' || account === 'tokens') {
        await db.query(
          `INSERT INTO limit_overrides (account_id, key_id, calls_per_minute, tokens_per_minute)
           SELECT a.id, $2, $3, $4 FROM accounts a WHERE a.name = $1`,
          [account, id, account === 'calls' ? FIT : null, account === 'tokens' ? FIT * WORST_TOKENS + 10 : null],
        );
      }
    }
    // Room for FIT worst cases and half of one more.
    await setBudget(db, 'capped', formatUnits(WORST * BigInt(FIT) + WORST / 2n), true);
    await setBudget(db, 'killed', formatUnits(WORST * 10n), true);
    upstream = await startFakeUpstream();
    daemons = await Promise.all(
      Array.from({ length: SIDECARS }, async () => {
        const d = await spawnDaemon('node', ['dist/cli/main.js', 'start'], {
          DATABASE_URL: url,
          METER_PORT: '0',
          METER_DATA_DIR: tempDirAtFileEnd(),
          METER_UPSTREAM_OPENAI: `${upstream.origin}/v1`,
          METER_FLUSH_INTERVAL_MS: '100',
          METER_KEY_REFRESH_MS: '300',
          METER_FLEET_LEASE_MS: String(LEASE_MS),
          METER_FLEET_SYNC_MS: '250',
          METER_LOG_LEVEL: 'warn',
        });
        atFileEnd(() => d.stop('SIGKILL'));
        return d;
      }),
    );
  }, 90_000);

  it('the hard cap: exactly the calls whose worst case fits are admitted, and spend ends under the cap', async () => {
    const answers = await burst('capped');
    const admitted = answers.filter((a) => a.status === 200).length;
    expect(answers.filter((a) => a.status !== 200).every((a) => a.status === 402 && a.code === 'budget_exceeded')).toBe(
      true,
    );
    expect(admitted).toBe(FIT);
    await eventually(async () => (await written('capped')).requests === String(FIT), 10_000, 'every call written');
    const spend = toUnits((await written('capped')).spend);
    expect(spend).toBe(ACTUAL * BigInt(FIT));
    expect(spend).toBeLessThanOrEqual(WORST * BigInt(FIT) + WORST / 2n);
  }, 60_000);

  it('the monthly quota admits exactly its count across the fleet', async () => {
    const answers = await burst('quota');
    expect(answers.filter((a) => a.status === 200)).toHaveLength(FIT);
    for (const a of answers.filter((x) => x.status !== 200))
      expect([a.status, a.code]).toEqual([429, 'quota_exceeded']);
    await eventually(async () => (await written('quota')).requests === String(FIT), 10_000, 'every call written');
  }, 60_000);

  it('calls a minute per key: exactly the limit in the minute, and RateLimit-Remaining is the fleet’s', async () => {
    const answers = await burst('calls');
    expect(answers.filter((a) => a.status === 200)).toHaveLength(FIT);
    for (const a of answers.filter((x) => x.status !== 200)) expect([a.status, a.code]).toEqual([429, 'rate_limited']);
    // Every sidecar reports the fleet's state: nothing left this minute.
    for (const d of daemons) {
      const a = await answer(await post(d, keys.calls!));
      expect([a.status, a.remaining]).toEqual([429, '0']);
    }
  }, 60_000);

  it('tokens a minute per key: each call reserves its worst case, exactly the calls that fit are admitted', async () => {
    const answers = await burst('tokens');
    expect(answers.filter((a) => a.status === 200)).toHaveLength(FIT);
    for (const a of answers.filter((x) => x.status !== 200)) expect([a.status, a.code]).toEqual([429, 'rate_limited']);
  }, 60_000);

  it('a sidecar killed with -9 while holding a lease: its unused share comes back within two lease periods', async () => {
    answerAfter(Promise.resolve());
    const victim = daemons[2]!;
    // A few calls in a row make the victim lease a slice beyond them.
    for (let i = 0; i < 3; i++) expect((await post(victim, keys.killed!)).status).toBe(200);
    await eventually(async () => (await written('killed')).requests === '3', 10_000, 'the victim’s calls written');
    const [lease] = await db.query<{ granted: string; held: string }>(
      `SELECT granted::text, held::text FROM fleet_leases
        WHERE limit_key = 'spend:' || (SELECT id FROM accounts WHERE name = 'killed') AND granted > held`,
    );
    expect(lease).toBeDefined(); // it holds an unused slice
    victim.child.kill('SIGKILL');
    daemons = daemons.slice(0, 2);
    // The budget has room for 10 worst cases: with 3 calls spent, a call is admitted while the
    // spend leaves its worst case, so the fleet admits exactly this many more.
    const budget = WORST * 10n;
    let expected = 0;
    for (let spent = ACTUAL * 3n; budget - spent >= WORST; spent += ACTUAL) expected++;
    const t0 = Date.now();
    let admitted = 0;
    while (admitted < expected && Date.now() - t0 < 2 * LEASE_MS + 5_000) {
      if ((await post(daemons[0]!, keys.killed!)).status === 200) admitted++;
      else await sleep(100);
    }
    const ms = Date.now() - t0;
    console.info(`fleet: a killed sidecar's share came back in ${ms} ms (lease ${LEASE_MS} ms)`);
    expect(admitted).toBe(expected);
    expect((await post(daemons[1]!, keys.killed!)).status).toBe(402); // and not one more
    expect(ms).toBeLessThan(2 * LEASE_MS + 5_000);
  }, 60_000);
});
