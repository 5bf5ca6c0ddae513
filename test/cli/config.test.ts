import { existsSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.js';
import { createTestDatabase, tempDir } from '../helpers/stores.js';

/** `meter config`, configuration warnings, and what `meter start` checks before it opens a store. */

interface Entry {
  variable: string;
  value: string | null;
  source: string;
  flag?: string;
}

const entry = (json: { variables: Entry[] }, name: string) => json.variables.find((v) => v.variable === name);

describe('meter config', () => {
  it(
    'prints every setting, its effective value and where it came from, secrets masked',
    { timeout: 60_000 },
    async () => {
      const r = await runCli(['config', '--json'], {
        METER_PORT: '9999',
        DATABASE_URL: 'postgres://meter:s3cret-pw@db.internal:5432/meter',
        METER_SMTP_URL: 'smtp://alerts:smtp-pw@mail:587',
        METER_LOG_LEVEL: '',
      });
      expect(r.code).toBe(0);
      expect(r.stdout.trim().split('\n')).toHaveLength(1); // not a TTY: one compact line
      expect(r.stdout).not.toContain('s3cret-pw');
      expect(r.stdout).not.toContain('smtp-pw');
      const json = JSON.parse(r.stdout) as { variables: Entry[]; unknown: unknown[] };
      expect(entry(json, 'METER_PORT')).toEqual({ variable: 'METER_PORT', value: '9999', source: 'environment' });
      expect(entry(json, 'METER_HOST')).toEqual({ variable: 'METER_HOST', value: '127.0.0.1', source: 'default' });
      expect(entry(json, 'METER_LOG_LEVEL')).toEqual({ variable: 'METER_LOG_LEVEL', value: 'info', source: 'default' });
      expect(entry(json, 'DATABASE_URL')).toEqual({
        variable: 'DATABASE_URL',
        value: 'postgres://meter:***@db.internal:5432/meter',
        source: 'environment',
      });
      expect(entry(json, 'METER_SMTP_URL')?.value).toBe('smtp://alerts:***@mail:587');
      expect(entry(json, 'METER_PRICES_FILE')).toEqual({ variable: 'METER_PRICES_FILE', value: null, source: 'unset' });
      // an upstream not overridden shows the address calls go to
      expect(entry(json, 'METER_UPSTREAM_ANTHROPIC')).toEqual({
        variable: 'METER_UPSTREAM_ANTHROPIC',
        value: 'https://api.anthropic.com/v1',
        source: 'default',
      });
      expect(entry(json, 'METER_UPSTREAM_GROQ')?.value).toBe('https://api.groq.com/openai/v1');
    },
  );

  it(
    'names unknown METER_* variables and upstream slugs with the closest valid name',
    { timeout: 60_000 },
    async () => {
      const r = await runCli(['config', '--json'], {
        METER_FLUSH_INTERVAL: '100',
        METER_UPSTREAM_OPENIA: 'http://127.0.0.1:1/v1',
        METER_KEY: 'mk_x',
      });
      expect(JSON.parse(r.stdout).unknown).toEqual([
        { name: 'METER_FLUSH_INTERVAL', suggestion: 'METER_FLUSH_INTERVAL_MS' },
        { name: 'METER_UPSTREAM_OPENIA', suggestion: 'METER_UPSTREAM_OPENAI' },
      ]);
      const text = await runCli(['config'], { METER_UPSTREAM_FOO: 'http://127.0.0.1:1' });
      expect(text.code).toBe(0);
      expect(text.stdout).toMatch(/^VARIABLE\s+VALUE\s+SOURCE$/m);
      expect(text.stderr).toMatch(
        /^meter: warning: METER_UPSTREAM_FOO is not a meter setting \(did you mean METER_UPSTREAM_\w+\?\)$/m,
      );
    },
  );

  it('a bad value is a usage error naming the variable, or the flag the user typed', { timeout: 60_000 }, async () => {
    const env = await runCli(['config'], { METER_PORT: 'abc' });
    expect(env).toMatchObject({
      code: 2,
      stdout: '',
      stderr: 'meter: METER_PORT="abc" is invalid: expected an integer from 0 to 65535\n',
    });
    const secret = await runCli(['config'], { DATABASE_URL: 'mysql://u:pw@h/db' });
    expect(secret.code).toBe(2);
    expect(secret.stderr).not.toContain('pw');
    const flag = await runCli(['start', '--port', 'abc'], { METER_PORT: '1234' });
    expect(flag).toMatchObject({
      code: 2,
      stderr: 'meter: --port "abc" is invalid: expected an integer from 0 to 65535\n',
    });
  });
});

describe('meter start checks before it opens the store', () => {
  let busy: Server;
  afterAll(() => new Promise<void>((r) => (busy ? busy.close(() => r()) : r())));

  it(
    'a port in use is reported at once, naming where the port came from, before any store is created',
    { timeout: 60_000 },
    async () => {
      busy = createServer();
      await new Promise<void>((r) => busy.listen(0, '127.0.0.1', () => r()));
      const port = (busy.address() as { port: number }).port;
      const dataDir = tempDir();
      const r = await runCli(['start', '--port', String(port)], {
        METER_DATA_DIR: dataDir,
        DATABASE_URL: '',
        METER_LOG_LEVEL: 'info',
        METER_UPSTREAM_OPENAI: 'http://127.0.0.1:9/v1/',
      });
      expect(r.code).toBe(1);
      // the start log says which upstreams are not the providers' own
      expect(r.stderr).toContain('upstreams overridden: openai → http://127.0.0.1:9/v1 (the others');
      // (the log lines are written asynchronously: the message is found among them, not last)
      expect(r.stderr.split('\n').filter((l) => l.startsWith('meter: '))).toEqual([
        `meter: port ${port} on 127.0.0.1 (--port) is already in use (another meter?): choose another with --port or METER_PORT`,
      ]);
      expect(existsSync(join(dataDir, 'pgdata'))).toBe(false);
    },
  );

  it('a database that cannot be reached is named as DATABASE_URL, password masked', { timeout: 60_000 }, async () => {
    const r = await runCli(['accounts', 'list'], { DATABASE_URL: 'postgres://root:hunter2-pw@127.0.0.1:1/nowhere' });
    expect(r.code).toBe(1);
    const lines = r.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(
      /^meter: cannot use the database at DATABASE_URL=postgres:\/\/root:\*\*\*@127\.0\.0\.1:1\/nowhere: /,
    );
    expect(r.stderr).not.toContain('hunter2');
  });
});

describe('configuration caught at `alerts add` time', () => {
  it(
    'an e-mail channel without METER_SMTP_URL is refused with the fix, and nothing is added',
    { timeout: 60_000 },
    async () => {
      const env = { DATABASE_URL: await createTestDatabase(), METER_SMTP_URL: '' };
      expect((await runCli(['accounts', 'create', 'acme'], env)).code).toBe(0);
      const r = await runCli(['alerts', 'add', '--account', 'acme', '--email', 'ops@example.com'], env);
      expect(r).toMatchObject({ code: 2, stdout: '' });
      expect(r.stderr).toMatch(
        /^meter: --email needs METER_SMTP_URL \(e\.g\. smtp:\/\/user:pass@smtp\.example\.com:587\)/,
      );
      const list = await runCli(['alerts', 'list', '--json'], env);
      expect(JSON.parse(list.stdout)).toEqual([]);
    },
  );
});
