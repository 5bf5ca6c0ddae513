import { expect, it } from 'vitest';
import { HardCap } from '../../src/budget/hard-cap.js';
import { toUnits } from '../../src/money.js';
import { BudgetMonitor } from '../../src/budget/monitor.js';
import { uuidv7 } from '../../src/metering/ids.js';
import { Pricer } from '../../src/pricing/index.js';
import { EventWriter } from '../../src/store/writer.js';
import { atFileEnd } from '../helpers/cleanup.js';
import { describeEachBackend, tempDir } from '../helpers/stores.js';
import { formatUnits, makeEvents, rng } from '../metering/events.js';
import { createAccount, setBudgetRow, silentLogger } from './helpers/seed.js';

const body = Buffer.from(
  JSON.stringify({ model: 'gpt-4o', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] }),
);

/**
 * The hard cap's ledger invariant, against a real writer and a real spend re-read racing each
 * other: at every moment, with no call in flight, the spend the sidecar knows plus what its
 * ledger counts locally is exactly the sum of every recorded cost: no cost is counted twice
 * (in the re-read spend and locally) and none is missed (in neither).
 */
describeEachBackend('the hard cap ledger', (backend) => {
  it('counts every ended call exactly once while the writer and the spend re-read race', async () => {
    const db = await backend.open();
    const accountId = await createAccount(db, 'ledger');
    await setBudgetRow(db, accountId, '1000', true);
    // Short intervals, so writes and re-reads interleave with the calls in every order (the
    // embedded store, one connection in a worker, gets a little longer ones).
    const fast = backend.name === 'postgres';
    const writer = new EventWriter({
      db,
      logger: silentLogger,
      spoolDir: tempDir('meter-spool-'),
      flushIntervalMs: fast ? 7 : 20,
    });
    writer.start();
    const monitor = new BudgetMonitor(db, silentLogger, { intervalMs: fast ? 3 : 10 });
    const cap = new HardCap(monitor, new Pricer());
    monitor.attachLedger(cap);
    await monitor.start();
    atFileEnd(async () => {
      await monitor.stop();
      await writer.stop();
    });

    const r = rng(13);
    let total = 0n;
    const checks = { count: 0, withUnseen: 0, withSeen: 0 };
    const check = () => {
      const budget = monitor.budgetOf(accountId)!;
      const local = cap.pendingUnits(accountId, budget.month);
      expect(budget.spendUnits + local).toBe(total);
      checks.count++;
      if (local > 0n) checks.withUnseen++;
      if (budget.spendUnits > 0n) checks.withSeen++;
    };
    for (let i = 0; i < 250; i++) {
      const time = new Date();
      const [event] = makeEvents(1, i + 1, { id: uuidv7(time.getTime()), accountId, time: time.toISOString() });
      const cost = BigInt(1 + Math.floor(r() * 1e6));
      const decision = cap.admit({
        id: event!.id,
        accountId,
        provider: 'openai',
        path: 'v1/chat/completions',
        body,
        bodyBytes: body.length,
        time,
      });
      expect(decision.ok).toBe(true);
      cap.settle({ ...event!, cost: formatUnits(cost) });
      writer.push({ ...event!, cost: formatUnits(cost) });
      total += cost;
      check();
      const pause = r();
      if (pause < 0.4) await new Promise((res) => setImmediate(res));
      else if (pause < 0.8) await new Promise((res) => setTimeout(res, Math.floor(r() * 12)));
      check();
    }
    // Every cost ends up in the re-read spend, and the ledger empties.
    await writer.drain();
    const deadline = Date.now() + 10_000;
    while (cap.pendingUnits(accountId, monitor.budgetOf(accountId)!.month) > 0n && Date.now() < deadline) {
      await new Promise((res) => setTimeout(res, 5));
      check();
    }
    expect(cap.pendingUnits(accountId, monitor.budgetOf(accountId)!.month)).toBe(0n);
    expect(monitor.budgetOf(accountId)!.spendUnits).toBe(total);
    const [row] = await db.query<{ spend: string }>('SELECT sum(spend)::text AS spend FROM usage_daily');
    expect(toUnits(row!.spend)).toBe(total);
    // The race was really run: both halves of the ledger were exercised.
    expect(checks.withUnseen).toBeGreaterThan(50);
    expect(checks.withSeen).toBeGreaterThan(50);
  }, 120_000); // the embedded store starts slowly on a busy machine
});
