import { describe, expect, it } from 'vitest';
import { FleetLedger } from '../../src/fleet/ledger.js';
import type { LimitSpec } from '../../src/fleet/lease.js';
import { migrate } from '../../src/store/migrate.js';
import { openPostgres } from '../../src/store/postgres.js';
import { atFileEnd } from '../helpers/cleanup.js';
import { createTestDatabase, postgresUrl } from '../helpers/stores.js';

const quiet = { warn() {}, info() {}, error() {} };
const spec: LimitSpec = {
  key: 'spend:test',
  windowStart: Date.UTC(2026, 10, 1),
  kind: 'written',
  amount: 100n,
  offline: 'closed',
  used: { sql: 'SELECT 0', params: [] },
};

async function ledgers(n: number) {
  const url = await createTestDatabase();
  const db = openPostgres(url);
  atFileEnd(() => db.close());
  await migrate(db);
  return Array.from({ length: n }, () => {
    const ledger = new FleetLedger(db, quiet, { ttlMs: 5_000, syncMs: 250, idleMs: 60_000 });
    atFileEnd(() => ledger.stop());
    return ledger;
  });
}

describe.skipIf(!postgresUrl)('fleet leases on PostgreSQL', () => {
  it('a busy sidecar gets the unused slice another one holds, within the wait bound', async () => {
    const [a, b] = await ledgers(2);
    // Calls in a row on A: its slice grows with its pace, beyond what its calls hold.
    for (let i = 0; i < 6; i++) expect(await a!.admit(`a${i}`, [{ spec, units: 5n }])).toEqual({ ok: true });
    const held = a!.lease(spec);
    expect(held.granted).toBeGreaterThan(held.held);
    // B needs what only A's unused slice can make room for: it waits for A to give it back.
    const need = 100n - held.held;
    const t0 = Date.now();
    expect(await b!.admit('b', [{ spec, units: need }])).toEqual({ ok: true });
    expect(Date.now() - t0).toBeLessThan(b!.waitMs + 1_000);
    // Now the fleet is full: A is refused at once, naming the limit.
    expect(await a!.admit('late', [{ spec, units: 1n }])).toMatchObject({ ok: false, limit: { key: 'spend:test' } });
    // A call that ends costing less gives the difference back.
    b!.release('b');
    expect(await a!.admit('again', [{ spec, units: 1n }])).toEqual({ ok: true });
  });

  it('a call whose worst case cannot be known holds all that is left; the rest of a limit is all or nothing', async () => {
    const [a] = await ledgers(1);
    expect(await a!.admit('x', [{ spec, units: 30n }])).toEqual({ ok: true });
    expect(await a!.admit('unknown', [{ spec, units: 'rest' }])).toEqual({ ok: true });
    expect(a!.lease(spec).held).toBe(100n);
    // Two limits at once: refused by one, nothing is taken from the other.
    const other: LimitSpec = { ...spec, key: 'quota:test', amount: 5n };
    expect(
      await a!.admit('both', [
        { spec: other, units: 1n },
        { spec, units: 1n },
      ]),
    ).toMatchObject({ ok: false });
    expect(a!.lease(other).held).toBe(0n);
  });
});
