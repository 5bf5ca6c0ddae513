import { beforeAll, expect, it } from 'vitest';
import { BudgetBook } from '../../src/budget/book.js';
import { ACCOUNT_SCOPE } from '../../src/budget/scope.js';
import { FleetAdmissions, FleetLedger, OverrideBook } from '../../src/fleet/index.js';
import { PlanBook } from '../../src/plans/index.js';
import type { Admitter } from '../../src/proxy/handler.js';
import type { CallMeter, Metering } from '../../src/metering/types.js';
import { Pricer } from '../../src/pricing/index.js';
import { answerChat, eventually } from '../helpers/fleet.js';
import { startProxyDaemon, type ProxyDaemon } from '../helpers/proxy.js';
import { startFakeUpstream } from '../helpers/upstreams.js';

// A hard-cap reservation (the call's worst case, held in the sidecar's lease of the budget) is
// settled by the call's usage event. When the metering fails so that
// no event will come (begin or end throws), the call is still answered, and its reservation
// must be freed when it ends: held until a restart, it would refuse calls under the budget.

let accountId = '';
let ledger: FleetLedger;
let admissions: FleetAdmissions;
/** What the budget's lease holds: reservations of calls in flight and costs not yet written. */
const held = () => ledger.leases().find((l) => l.spec.key.startsWith('budget:'))?.held ?? 0n;
let reserved = 0n;
const admitter: Admitter = {
  admit: (p, c) => {
    const a = admissions.admit(p, c);
    const note = () => (reserved = held());
    if (a instanceof Promise) return a.finally(note);
    note();
    return a;
  },
  needsBody: (p) => admissions.needsBody(p),
  release: (id) => admissions.release(id),
};

let failure: 'begin' | 'end' = 'begin';
const idle: Omit<CallMeter, 'end'> = { requestBody() {}, responseHead() {}, responseChunk() {} };
const failingMetering: Metering = {
  begin() {
    if (failure === 'begin') throw new Error('metering broke at begin');
    return {
      ...idle,
      end() {
        throw new Error('metering broke at end');
      },
    };
  },
};

let proxy: ProxyDaemon;
beforeAll(async () => {
  const upstream = await startFakeUpstream();
  answerChat(upstream, { prompt: 100, completion: 400 });
  proxy = await startProxyDaemon({
    upstreams: { openai: `${upstream.origin}/v1` },
    metering: failingMetering,
    admission: admitter,
  });
  const store = proxy.daemon.store;
  const plans = new PlanBook();
  await plans.refresh(store);
  ledger = new FleetLedger(store, { warn() {}, info() {}, error() {} });
  const [row] = await store.query<{ id: string }>('SELECT id::text FROM accounts WHERE name = $1', [proxy.account]);
  accountId = row!.id;
  // The account's monthly budget of $10 with the hard cap, as `meter budget set` makes it.
  const book = new BudgetBook([
    {
      id: 'a1b2c3d4e5f6',
      accountId,
      account: proxy.account,
      scope: ACCOUNT_SCOPE,
      window: 'month',
      timezone: 'UTC',
      amount: '10',
      amountUnits: 1_000_000_000n,
      levels: [50, 80, 100],
      action: 'block',
      strict: true,
      enforced: true,
      accountBudget: true,
    },
  ]);
  admissions = new FleetAdmissions(plans, new OverrideBook(), ledger, new Pricer(), { book });
});

const call = () =>
  fetch(`${proxy.url}/proxy/openai/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${proxy.key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'gpt-4o', max_tokens: 500, messages: [{ role: 'user', content: 'hello' }] }),
  });

for (const step of ['begin', 'end'] as const) {
  it(`a call whose metering throws at ${step} is answered, and its reservation is freed when it ends`, async () => {
    failure = step;
    reserved = 0n;
    const res = await call();
    expect(res.status).toBe(200);
    await res.text();
    expect(reserved).toBeGreaterThan(0n); // the call was reserved while in flight
    await eventually(async () => held() === 0n, 2_000, 'the reservation freed');
  });
}
