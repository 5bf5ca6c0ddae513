import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { lockPath } from '../../src/store/lockfile.js';
import { METER_BIN, runCli, runClis } from '../helpers/cli.js';
import { spawnDaemon } from '../helpers/daemon.js';
import { tempDir } from '../helpers/stores.js';

/** CONTRACT §1: every command has --help; a failure is one line on stderr, non-zero exit, and a
 *  stack trace only with METER_DEBUG=1. */

const COMMANDS = [
  [],
  ['start'],
  ['migrate'],
  ['pricing'],
  ['pricing', 'show'],
  ['plans'],
  ['plans', 'list'],
  ['plans', 'set'],
  ['limits'],
  ['limits', 'set'],
  ['limits', 'show'],
  ['accounts'],
  ['accounts', 'create'],
  ['accounts', 'list'],
  ['accounts', 'set-plan'],
  ['accounts', 'delete'],
  ['keys'],
  ['keys', 'create'],
  ['keys', 'list'],
  ['keys', 'revoke'],
  ['keys', 'rotate'],
  ['budget'],
  ['budget', 'set'],
  ['budget', 'show'],
  ['budget', 'clear'],
  ['budgets'],
  ['budgets', 'create'],
  ['budgets', 'list'],
  ['budgets', 'show'],
  ['budgets', 'update'],
  ['budgets', 'delete'],
  ['alerts'],
  ['alerts', 'add'],
  ['alerts', 'list'],
  ['alerts', 'remove'],
  ['alerts', 'test'],
  ['config'],
  ['top'],
  ['reconcile'],
  ['billing', 'link'],
  ['billing', 'list'],
  ['billing', 'unlink'],
  ['billing', 'status'],
  ['export'],
];

/** The top-level commands, in the order `meter --help` lists them. */
const TOP_LEVEL = [...new Set(COMMANDS.filter((c) => c.length > 0).map((c) => c[0]!))].join(', ');

const oneLine = (stderr: string) => stderr.split('\n').filter((l) => l.trim() !== '');

describe('meter usage and errors', () => {
  it('every command answers --help on stdout with exit 0', { timeout: 240_000 }, async () => {
    const results = await runClis(COMMANDS.map((args) => [...args, '--help']));
    results.forEach((r, i) => {
      const what = `meter ${COMMANDS[i]!.join(' ')} --help`;
      expect(r.code, what).toBe(0);
      expect(r.stdout, what).toMatch(new RegExp(`^Usage: meter ${COMMANDS[i]!.join(' ')}`.trimEnd()));
      expect(r.stderr, what).toBe('');
    });
  });

  it(
    'a usage error is one line on stderr naming the problem and where help is, exit 2',
    { timeout: 120_000 },
    async () => {
      const cases: [string[], string][] = [
        [
          ['keys', 'create'],
          "meter: required option '--account <name>' not specified (see `meter keys create --help`)",
        ],
        [['keys', 'list', '--bogus'], "meter: unknown option '--bogus' (see `meter keys list --help`)"],
        [['accounts', 'create'], "meter: missing required argument 'name' (see `meter accounts create --help`)"],
        [
          ['bogus'],
          `meter: unknown command "bogus" for \`meter\`: expected one of ${TOP_LEVEL} (see \`meter --help\`)`,
        ],
        [
          ['acounts'],
          `meter: unknown command "acounts" (did you mean accounts?) for \`meter\`: expected one of ${TOP_LEVEL} (see \`meter --help\`)`,
        ],
        [
          ['keys'],
          'meter: missing command for `meter keys`: expected one of create, list, revoke, rotate (see `meter keys --help`)',
        ],
        [
          ['budget', 'nope'],
          'meter: unknown command "nope" for `meter budget`: expected one of set, show, clear (see `meter budget --help`)',
        ],
        [['start', '--port', 'abc'], 'meter: --port "abc" is invalid: expected an integer from 0 to 65535'],
      ];
      const results = await runClis(cases.map(([args]) => args));
      results.forEach((r, i) => {
        const [args, line] = cases[i]!;
        expect(r.code, args.join(' ')).toBe(2);
        expect(r.stdout, args.join(' ')).toBe('');
        expect(oneLine(r.stderr), args.join(' ')).toEqual([line]);
      });
    },
  );

  it('a bare `meter` prints the help on stdout, exit 0', { timeout: 60_000 }, async () => {
    const r = await runCli([]);
    expect(r).toMatchObject({ code: 0, stderr: '' });
    expect(r.stdout).toMatch(/^Usage: meter/);
    for (const name of TOP_LEVEL.split(', ')) expect(r.stdout).toContain(`  ${name}`);
  });

  it('`meter help <command>` still prints that command’s help', { timeout: 60_000 }, async () => {
    const r = await runCli(['keys', 'help', 'rotate']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^Usage: meter keys rotate/);
  });

  it('a failing command prints no stack trace, unless METER_DEBUG=1', { timeout: 60_000 }, async () => {
    const env = { METER_DATA_DIR: tempDir(), DATABASE_URL: '' };
    // One after the other: two processes never open one embedded store.
    const plain = await runCli(['budget', 'show', '--account', 'ghost'], env);
    const debug = await runCli(['budget', 'show', '--account', 'ghost'], { ...env, METER_DEBUG: '1' });
    expect(plain.code).toBe(1);
    expect(oneLine(plain.stderr)).toEqual(['meter: unknown account "ghost" (see `meter accounts list`)']);
    expect(debug.code).toBe(1);
    expect(debug.stderr).toContain('unknown account "ghost"');
    expect(debug.stderr).toMatch(/\n\s+at /);
  });

  it('keys revoke and rotate take the full key too, and never echo its secret', { timeout: 120_000 }, async () => {
    const env = { METER_DATA_DIR: tempDir(), DATABASE_URL: '' };
    expect((await runCli(['accounts', 'create', 'acme'], env)).code).toBe(0);
    const created = JSON.parse((await runCli(['keys', 'create', '--account', 'acme', '--json'], env)).stdout) as {
      id: string;
      key: string;
    };
    const secret = created.key.slice(16);

    const unknown = `mk_000000000000_${secret}`;
    const ghost = await runCli(['keys', 'revoke', unknown], env);
    expect(ghost.code).toBe(1);
    expect(oneLine(ghost.stderr)).toEqual(['meter: unknown key "mk_000000000000_…" (see `meter keys list`)']);
    const ghostRotate = await runCli(['keys', 'rotate', unknown], env);
    expect(ghostRotate.stderr).not.toContain(secret);

    const revoked = await runCli(['keys', 'revoke', created.key, '--json'], env);
    expect(revoked.code).toBe(0);
    expect(JSON.parse(revoked.stdout)).toMatchObject({ id: created.id });
    expect(revoked.stdout + revoked.stderr).not.toContain(secret);
  });
});

describe('meter commands on a busy embedded store', () => {
  it('two commands at once both succeed: the second waits for the first', { timeout: 120_000 }, async () => {
    const env = { METER_DATA_DIR: tempDir(), DATABASE_URL: '' };
    const [a, b] = await Promise.all([
      runCli(['accounts', 'create', 'one'], env),
      runCli(['accounts', 'create', 'two'], env),
    ]);
    expect([a.code, a.stderr, b.code, b.stderr]).toEqual([0, '', 0, '']);
    const list = JSON.parse((await runCli(['accounts', 'list', '--json'], env)).stdout) as { name: string }[];
    expect(list.map((x) => x.name)).toEqual(['one', 'two']);
  });

  it('a command right after `meter start` goes through the daemon once it is up', { timeout: 120_000 }, async () => {
    const dataDir = tempDir();
    const env = { METER_DATA_DIR: dataDir, DATABASE_URL: '', METER_PORT: '0' };
    const starting = spawnDaemon(process.execPath, [METER_BIN, 'start'], env);
    // Wait until the daemon holds the lock, i.e. is starting but not yet listening.
    while (!existsSync(lockPath(dataDir))) await new Promise((r) => setTimeout(r, 20));
    const created = await runCli(['accounts', 'create', 'early'], env);
    const daemon = await starting;
    try {
      expect(created).toMatchObject({ code: 0, stderr: '' });
    } finally {
      expect(await daemon.stop('SIGTERM')).toBe(0);
    }
  });
});
