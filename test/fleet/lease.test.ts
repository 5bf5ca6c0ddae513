import { describe, expect, it } from 'vitest';
import { Lease, MINUTE_MS, type LimitSpec } from '../../src/fleet/lease.js';

const minute: LimitSpec = { key: 'rpm:key:k', windowStart: 0, kind: 'minute', amount: 3n, offline: 'open' };
const written: LimitSpec = { key: 'quota:a', windowStart: 0, kind: 'written', amount: 10n, offline: 'open' };
const T0 = 1_000_000;

/** A lease as a statement left it: granted `n`, valid for a while. */
function leased(spec: LimitSpec, n: bigint, now = T0): Lease {
  const lease = new Lease(spec);
  lease.granted = n;
  lease.validUntil = now + 8_000;
  return lease;
}

describe('a lease', () => {
  it('per-minute slots: a slot is free again a minute after the tenth of a second its call came in', () => {
    const lease = leased(minute, 3n);
    lease.take('a', 1n, T0);
    lease.take('b', 1n, T0 + 20_000);
    lease.take('c', 1n, T0 + 40_000);
    for (const id of ['a', 'b', 'c']) lease.settle(id, undefined, new Date(T0).toISOString()); // ended: slots stay
    expect(lease.available(T0 + 60_099)).toBe(0n); // three calls within the last minute
    expect(lease.resetSeconds(T0 + 30_000)).toBe(31); // the oldest slot frees at T0 + 60.1 s
    // Slots free one by one, each a minute after its own second; the lease is renewed meanwhile.
    lease.validUntil = T0 + 200_000;
    expect(lease.available(T0 + 60_100)).toBe(1n);
    expect(lease.available(T0 + 80_100)).toBe(2n);
    expect(lease.resetSeconds(T0 + 80_100)).toBe(20);
    expect(lease.available(T0 + 100_100)).toBe(3n);
    expect(lease.resetSeconds(T0 + 100_100)).toBe(60); // none held
    expect(lease.entries.size).toBe(0); // nothing kept per call once calls end
  });

  it('tokens: a call holds its worst case, then what it used, for its minute', () => {
    const lease = leased({ ...minute, key: 'tpm:key:k', amount: 1000n }, 1000n);
    lease.take('a', 700n, T0);
    expect(lease.available(T0 + 1)).toBe(300n);
    lease.settle('a', 120n, new Date(T0).toISOString()); // it used 120 tokens
    expect(lease.available(T0 + 2)).toBe(880n);
    lease.validUntil = T0 + 200_000;
    expect(lease.available(T0 + MINUTE_MS + 100)).toBe(1000n);
  });

  it('a call that is released gives its slot back at once', () => {
    const lease = leased(minute, 3n);
    lease.take('a', 1n, T0);
    lease.take('b', 1n, T0 + 1);
    lease.release('a');
    expect(lease.available(T0 + 2)).toBe(2n);
  });

  it('spend and calls: held from admission until the database shows the event, then no longer here', () => {
    const lease = leased(written, 5n);
    lease.take('a', 1n, T0);
    lease.take('b', 1n, T0);
    expect(lease.ended()).toEqual([]); // in flight: nothing to look for yet
    lease.settle('a', undefined, '2026-11-26T00:00:00.000Z');
    expect(lease.ended()).toEqual([{ id: 'a', time: '2026-11-26T00:00:00.000Z' }]);
    expect(lease.held).toBe(2n);
    lease.seen(['a', 'unknown']);
    expect(lease.held).toBe(1n);
    lease.release('b'); // never forwarded: nothing was spent
    expect(lease.held).toBe(0n);
    // A call that cost nothing leaves nothing to look for.
    lease.take('c', 1n, T0);
    lease.settle('c', 0n, '2026-11-26T00:00:00.000Z');
    expect([lease.held, lease.ended()]).toEqual([0n, []]);
  });

  it('a lapsed slice is not used; offline, an open limit admits as though alone and a closed one does not', () => {
    const lease = leased(written, 5n);
    lease.used = 7n; // the database's count when last read
    lease.othersHeld = 2n;
    expect(lease.available(T0 + 8_000)).toBe(0n);
    lease.offline = true;
    expect(lease.available(T0 + 8_000)).toBe(3n); // 10 − 7, the other sidecars not counted
    const closed = leased({ ...written, offline: 'closed' }, 5n);
    closed.offline = true;
    expect(closed.available(T0 + 8_000)).toBe(0n);
    expect(lease.remaining()).toBe(1n); // the fleet's room as last seen: 10 − 7 − 2
  });
});
