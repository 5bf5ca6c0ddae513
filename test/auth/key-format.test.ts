import { describe, expect, it } from 'vitest';
import { parseDuration } from '../../src/auth/duration.js';
import {
  generateServiceKey,
  hashSecret,
  carriesServiceKey,
  parseServiceKey,
  secretMatches,
  serviceKeyFromHeaders,
} from '../../src/auth/key-format.js';

describe('service key format (CONTRACT §5)', () => {
  it('is mk_<12 hex>_<32+ base64url>, and parses back', () => {
    const { id, secret, key } = generateServiceKey();
    expect(key).toMatch(/^mk_[0-9a-f]{12}_[A-Za-z0-9_-]{32,}$/);
    expect(parseServiceKey(key)).toEqual({ id, secret });
    expect(generateServiceKey().key).not.toBe(key);
  });

  it.each([
    ['', 'empty'],
    ['sk-abc', 'not ours'],
    ['mk_4f9c2a1b7d3e', 'no secret'],
    ['mk_4f9c2a1b7d3e_short', 'secret under 32 characters'],
    [`mk_4F9C2A1B7D3E_${'a'.repeat(40)}`, 'upper-case id'],
    [`mk_4f9c2a1b7d3_${'a'.repeat(40)}`, 'id of 11'],
    [`mk_4f9c2a1b7d3e-${'a'.repeat(40)}`, 'wrong separator'],
    [`mk_4f9c2a1b7d3e_${'a'.repeat(39)}!`, 'character outside base64url'],
    [`mk_4f9c2a1b7d3e_${'a'.repeat(129)}`, 'absurdly long'],
  ])('refuses %j (%s)', (token) => {
    expect(parseServiceKey(token)).toBeUndefined();
  });

  it('stores SHA-256 of the secret and compares in constant time', () => {
    const { secret } = generateServiceKey();
    const hash = hashSecret(secret);
    expect(hash).toHaveLength(32);
    expect(secretMatches(secret, hash)).toBe(true);
    expect(secretMatches(secret + 'x', hash)).toBe(false);
  });

  it('comes from X-Meter-Key, else from Authorization: Bearer', () => {
    expect(serviceKeyFromHeaders({ authorization: 'Bearer mk_a' })).toEqual({ token: 'mk_a', viaMeterKey: false });
    expect(serviceKeyFromHeaders({ authorization: 'bearer  mk_a ' })).toEqual({ token: 'mk_a', viaMeterKey: false });
    expect(serviceKeyFromHeaders({ authorization: 'Bearer sk-x', 'x-meter-key': 'mk_b' })).toEqual({
      token: 'mk_b',
      viaMeterKey: true,
    });
    expect(serviceKeyFromHeaders({ authorization: 'Basic eDp5' })).toBeUndefined();
    expect(serviceKeyFromHeaders({})).toBeUndefined();
    expect(carriesServiceKey('Bearer mk_0123456789ab_secret')).toBe(true);
    expect(carriesServiceKey('mk_0123456789ab_secret')).toBe(true);
    expect(carriesServiceKey('Bearer sk-abc')).toBe(false);
    expect(carriesServiceKey('Bearer sk-mk_abc')).toBe(false);
  });
});

describe('durations', () => {
  it.each([
    ['30s', 30],
    ['15m', 900],
    ['1h', 3600],
    ['2d', 172_800],
    ['0', 0],
    [' 1h ', 3600],
  ])('%j is %i s', (v, s) => {
    expect(parseDuration(v)).toBe(s);
  });

  it.each(['1w', '1.5h', '-1h', 'h', '1 h', '', '1H'])('%j is refused, naming the allowed forms', (v) => {
    expect(() => parseDuration(v, '--grace')).toThrow(/invalid --grace .*30s, 15m, 1h, 2d.*0/);
  });
});
