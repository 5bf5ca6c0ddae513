import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../src/config.js';

describe('configuration', () => {
  it('has the contract defaults and is frozen', () => {
    const c = loadConfig({ HOME: '/home/u' });
    expect(c).toMatchObject({
      host: '127.0.0.1',
      port: 8787,
      databaseUrl: undefined,
      flushIntervalMs: 200,
      logLevel: 'info',
    });
    expect(Object.isFrozen(c)).toBe(true);
  });

  it('lets flags win over the environment, and trims base addresses', () => {
    const c = loadConfig({ METER_PORT: '9000', METER_UPSTREAM_OPENAI: 'http://127.0.0.1:9/v1/' }, { METER_PORT: '0' });
    expect(c.port).toBe(0);
    expect(c.upstreams.openai).toBe('http://127.0.0.1:9/v1');
  });

  it.each([
    [{ METER_PORT: 'abc' }, /^METER_PORT="abc" is invalid: expected an integer from 0 to 65535$/],
    [{ METER_PORT: '70000' }, /^METER_PORT="70000" is invalid: expected an integer from 0 to 65535$/],
    [
      { METER_FLUSH_INTERVAL_MS: '-5' },
      /METER_FLUSH_INTERVAL_MS="-5" is invalid: expected an integer from 10 to 60000/,
    ],
    [
      { METER_LOG_LEVEL: 'loud' },
      /METER_LOG_LEVEL="loud" is invalid: expected one of fatal, error, warn, info, debug, trace, silent/,
    ],
    [
      { METER_UPSTREAM_GEMINI: 'ftp://x' },
      /METER_UPSTREAM_GEMINI="ftp:\/\/x" is invalid: expected a URL starting with http:\/\/ or https:\/\//,
    ],
  ])('rejects %j naming the variable and what is allowed', (env, message) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(message);
  });

  it('never echoes a database URL, which may hold a password', () => {
    expect(() => loadConfig({ DATABASE_URL: 'mysql://u:hunter2@h/db' })).toThrow(
      /^DATABASE_URL is invalid: expected a URL starting with postgres:\/\/ or postgresql:\/\/$/,
    );
    try {
      loadConfig({ DATABASE_URL: 'mysql://u:hunter2@h/db' });
    } catch (e) {
      expect((e as Error).message).not.toContain('hunter2');
    }
  });
});
