import { readFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { startDaemon, type Daemon } from '../../src/server/daemon.js';
import { openPostgres } from '../../src/store/postgres.js';
import { migrate } from '../../src/store/migrate.js';
import type { Db } from '../../src/store/types.js';
import { makeEvent, seedEvents } from '../analytics/helpers/seed.js';
import { atFileEnd, tempDirAtFileEnd } from '../helpers/cleanup.js';
import { runCli } from '../helpers/cli.js';
import { createTestDatabase, postgresUrl } from '../helpers/stores.js';

const events = (accountId: string) => [
  makeEvent({ accountId, time: '2026-03-02T10:00:00.000Z', model: 'gpt-4o', cost: '0.12345678', tags: { team: 'a' } }),
  makeEvent({
    accountId,
    time: '2026-03-01T09:00:00.000Z',
    provider: 'anthropic',
    model: 'claude-sonnet-4',
    cost: '1.00000000',
  }),
  makeEvent({ accountId, time: '2026-04-01T00:00:00.000Z', cost: '7.00000000' }), // past --to
];

const EXPECTED_CSV = [
  'time,provider,model,key_id,status,input_tokens,cached_input_tokens,output_tokens,cost,usage_source,tag:team',
  '2026-03-01T09:00:00.000Z,anthropic,claude-sonnet-4,000000000000,200,100,0,20,1.00000000,provider,',
  '2026-03-02T10:00:00.000Z,openai,gpt-4o,000000000000,200,100,0,20,0.12345678,provider,a',
  '',
].join('\r\n');

async function accountId(db: Db, name: string): Promise<string> {
  return (await db.query<{ id: string }>('SELECT id FROM accounts WHERE name = $1', [name]))[0]!.id;
}

describe.skipIf(!postgresUrl)('meter export on PostgreSQL', () => {
  let env: NodeJS.ProcessEnv;
  let dir: string;

  beforeAll(async () => {
    const url = await createTestDatabase();
    const db = openPostgres(url);
    atFileEnd(() => db.close());
    await migrate(db);
    dir = tempDirAtFileEnd();
    env = { DATABASE_URL: url, METER_DATA_DIR: dir };
    expect((await runCli(['accounts', 'create', 'acme', '--plan', 'pro'], env)).code).toBe(0);
    await seedEvents(db, events(await accountId(db, 'acme')));
  });

  it(
    'writes the file whole (CSV, FOCUS, grouped) and says what it wrote with --json',
    { timeout: 60_000 },
    async () => {
      const out = join(dir, 'march.csv');
      const r = await runCli(
        [
          'export',
          '--account',
          'acme',
          '--from',
          '2026-03-01',
          '--to',
          '2026-04-01',
          '--format',
          'csv',
          '--out',
          out,
          '--json',
        ],
        env,
      );
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      expect(readFileSync(out, 'utf8')).toBe(EXPECTED_CSV);
      expect(JSON.parse(r.stdout)).toMatchObject({ account: 'acme', format: 'csv', rows: 2, out });
      const grouped = await runCli(
        [
          'export',
          '--account',
          'acme',
          '--from',
          '2026-03-01',
          '--to',
          '2026-04-01',
          '--format',
          'jsonl',
          '--group-by',
          'model',
        ],
        env,
      );
      expect(grouped.code).toBe(0);
      expect(grouped.stdout.trimEnd().split('\n')).toEqual([
        '{"provider":"anthropic","model":"claude-sonnet-4","requests":1,"input_tokens":100,"output_tokens":20,"cost":"1.00000000"}',
        '{"provider":"openai","model":"gpt-4o","requests":1,"input_tokens":100,"output_tokens":20,"cost":"0.12345678"}',
      ]);
      const focusFile = join(dir, 'march-focus.csv');
      const focus = await runCli(
        ['export', '--account', 'acme', '--from', '2026-03-01', '--to', '2026-04-01', '--format', 'focus'].concat([
          '--out',
          focusFile,
        ]),
        env,
      );
      expect(focus.code).toBe(0);
      // Two calls of input and output tokens each: a header, four rows, the final CRLF.
      const lines = readFileSync(focusFile, 'utf8').split('\r\n');
      expect(lines).toHaveLength(6);
      // FOCUS metadata beside the file: the version, the schema and its columns.
      const meta = JSON.parse(readFileSync(`${focusFile}.metadata.json`, 'utf8')) as {
        FocusVersion: string;
        DataGenerator: string;
        SchemaId: string;
        CreationDate: string;
        ColumnDefinition: { ColumnName: string; DataType: string }[];
      };
      expect(meta.FocusVersion).toBe('1.2');
      expect(meta.DataGenerator).toBe('meter');
      expect(meta.CreationDate).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/);
      expect(meta.ColumnDefinition.map((c) => c.ColumnName).join(',')).toBe(lines[0]);
      expect(meta.ColumnDefinition.find((c) => c.ColumnName === 'BilledCost')!.DataType).toBe('DECIMAL');
    },
  );

  it('a bad flag is a usage error (2) naming it; an unknown account a runtime failure (1); no file is left', async () => {
    const bad = await runCli(['export', '--account', 'acme', '--format', 'xlsx'], env);
    expect(bad.code).toBe(2);
    expect(bad.stderr.trim()).toBe(
      'meter: --format must be one of csv, jsonl, focus, got "xlsx" (see `meter export --help`)',
    );
    const day = await runCli(['export', '--account', 'acme', '--format', 'csv', '--from', '2026-13-01'], env);
    expect(day.code).toBe(2);
    expect(day.stderr).toContain('--from must be a UTC date YYYY-MM-DD');
    const out = join(dir, 'nobody.csv');
    const unknown = await runCli(['export', '--account', 'nobody', '--format', 'csv', '--out', out], env);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/^meter: unknown account "nobody"/);
    expect(existsSync(out)).toBe(false);
  });
});

describe('meter export through a daemon that holds the embedded store', () => {
  let daemon: Daemon;
  let env: NodeJS.ProcessEnv;
  let dir: string;

  beforeAll(async () => {
    dir = tempDirAtFileEnd();
    env = { DATABASE_URL: '', METER_DATA_DIR: dir };
    daemon = await startDaemon(loadConfig({ METER_PORT: '0', METER_DATA_DIR: dir }), pino({ level: 'silent' }));
    expect((await runCli(['accounts', 'create', 'acme', '--plan', 'pro'], env)).code).toBe(0);
    await seedEvents(daemon.store, events(await accountId(daemon.store, 'acme')));
  }, 120_000);
  afterAll(() => daemon?.close());

  it('streams the same rows through the admin API', { timeout: 60_000 }, async () => {
    const out = join(dir, 'march.csv');
    const r = await runCli(
      ['export', '--account', 'acme', '--from', '2026-03-01', '--to', '2026-04-01', '--format', 'csv', '--out', out],
      env,
    );
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(readFileSync(out, 'utf8')).toBe(EXPECTED_CSV);
    const unknown = await runCli(['export', '--account', 'nobody', '--format', 'csv'], env);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/^meter: unknown account "nobody"/);
  });
});
