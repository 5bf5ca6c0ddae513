import { describe, expect, it } from 'vitest';
import { parseTags } from '../../src/metering/tags.js';

const ok = (headers: Record<string, string>) => {
  const r = parseTags(headers);
  if (!r.ok) throw new Error(`expected ok, got: ${r.message}`);
  return r.tags;
};
const bad = (headers: Record<string, string>) => {
  const r = parseTags(headers);
  if (r.ok) throw new Error(`expected an error, got ${JSON.stringify(r.tags)}`);
  return r.message;
};

describe('parseTags', () => {
  it('no tagging headers: no tags', () => {
    expect(ok({})).toEqual({});
    expect(ok({ 'x-metering-tags': '  ' })).toEqual({});
  });

  it('key=value pairs, values percent-decoded, spaces around pairs ignored', () => {
    expect(ok({ 'x-metering-tags': 'team=search, env=prod' })).toEqual({ team: 'search', env: 'prod' });
    expect(ok({ 'x-metering-tags': 'q=a%2Cb%3Dc,name=J%C3%BCrgen%20M' })).toEqual({ q: 'a,b=c', name: 'Jürgen M' });
    expect(ok({ 'x-metering-tags': 'a=x=y,' })).toEqual({ a: 'x=y' });
  });

  it('a JSON object of strings', () => {
    expect(ok({ 'x-metering-tags': '{"team":"search","env":"a,b=c%20"}' })).toEqual({
      team: 'search',
      env: 'a,b=c%20',
    });
  });

  it('X-Feature-Name and X-Tenant-ID become feature and tenant and win over X-Metering-Tags', () => {
    expect(
      ok({ 'x-metering-tags': 'feature=old,tenant=old,team=t', 'x-feature-name': 'chat', 'x-tenant-id': 'acme' }),
    ).toEqual({ feature: 'chat', tenant: 'acme', team: 't' });
    expect(ok({ 'x-metering-tags': '{"feature":"old"}', 'x-feature-name': 'new' })).toEqual({ feature: 'new' });
    expect(ok({ 'x-tenant-id': 'acme' })).toEqual({ tenant: 'acme' });
  });

  it('__proto__ is an ordinary key', () => {
    const tags = ok({ 'x-metering-tags': '__proto__=x' });
    expect(Object.keys(tags)).toEqual(['__proto__']);
    expect(Object.getPrototypeOf(tags)).toBe(Object.prototype);
  });

  it('at most 20 tags, headers included', () => {
    const pairs = (n: number) => Array.from({ length: n }, (_, i) => `k${i}=v`).join(',');
    expect(Object.keys(ok({ 'x-metering-tags': pairs(20) }))).toHaveLength(20);
    expect(bad({ 'x-metering-tags': pairs(21) })).toMatch(/21 tags.*at most 20/);
    expect(bad({ 'x-metering-tags': pairs(20), 'x-feature-name': 'f' })).toMatch(/at most 20/);
    // a header overriding a key already present does not add a tag
    expect(Object.keys(ok({ 'x-metering-tags': pairs(19) + ',feature=a', 'x-feature-name': 'f' }))).toHaveLength(20);
  });

  it('keys: 1-64 of [A-Za-z0-9_.-]', () => {
    expect(ok({ 'x-metering-tags': `${'k'.repeat(64)}=v,a.b-c_D9=v` })).toHaveProperty('a.b-c_D9', 'v');
    expect(bad({ 'x-metering-tags': `${'k'.repeat(65)}=v` })).toMatch(
      /tag key .* is invalid: keys are 1-64 characters of A-Z a-z 0-9 _ \. -/,
    );
    expect(bad({ 'x-metering-tags': 'bad key=v' })).toMatch(/"bad key" is invalid/);
    expect(bad({ 'x-metering-tags': '=v' })).toMatch(/"" is invalid/);
    expect(bad({ 'x-metering-tags': '{"a/b":"v"}' })).toMatch(/"a\/b" is invalid/);
  });

  it('values: 1-256 characters (characters, not bytes)', () => {
    expect(ok({ 'x-metering-tags': `a=${'v'.repeat(256)}` }).a).toHaveLength(256);
    expect(ok({ 'x-metering-tags': JSON.stringify({ e: '😀'.repeat(256) }) }).e).toHaveLength(512);
    expect(bad({ 'x-metering-tags': `a=${'v'.repeat(257)}` })).toMatch(
      /"a" has a value of 257 characters: values are 1-256 characters/,
    );
    expect(bad({ 'x-metering-tags': 'a=' })).toMatch(/"a" has an empty value: values are 1-256/);
    expect(bad({ 'x-metering-tags': '{"a":""}' })).toMatch(/empty value/);
    expect(bad({ 'x-feature-name': 'x'.repeat(300) })).toMatch(/\(from X-Feature-Name\)/);
    expect(bad({ 'x-tenant-id': '' })).toMatch(/empty value: .*\(from X-Tenant-ID\)/);
  });

  it('malformed input says what is allowed', () => {
    expect(bad({ 'x-metering-tags': 'team' })).toMatch(/"team" is not key=value: send key=value pairs/);
    expect(bad({ 'x-metering-tags': 'a=%E0%A4%A' })).toMatch(/malformed percent-encoding/);
    expect(bad({ 'x-metering-tags': 'a=1,a=2' })).toMatch(/"a" is given twice/);
    expect(bad({ 'x-metering-tags': '{"a":' })).toMatch(/not valid JSON: send a JSON object of strings/);
    expect(bad({ 'x-metering-tags': '{"a":1}' })).toMatch(/"a" must be a string, got number/);
    expect(bad({ 'x-metering-tags': '{"a":null}' })).toMatch(/got null/);
    expect(bad({ 'x-metering-tags': '["a"]' })).toMatch(/is not key=value|object of strings/);
  });
});
