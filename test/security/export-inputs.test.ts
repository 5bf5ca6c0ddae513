/**
 * Exports against hostile input: dates the store would refuse, cells that a spreadsheet opened
 * with `;` or TAB as its separator would run as formulas, and `--out` paths that are missing or
 * have a link planted beside them.
 */
import { existsSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { openAside } from '../../cli/aside-file.js';
import { csvField } from '../../src/export/format.js';
import type { Db } from '../../src/store/types.js';
import { createAccount, FixedKeys, startApi, type TestAccount, type TestApi } from '../analytics/helpers/api.js';
import { makeEvent, seedEvents } from '../analytics/helpers/seed.js';
import { tempDirAtFileEnd } from '../helpers/cleanup.js';
import { runCli } from '../helpers/cli.js';
import { backends, postgresUrl } from '../helpers/stores.js';

describe.skipIf(!postgresUrl)('dates the store would refuse', () => {
  let api: TestApi;
  let pro: TestAccount;
  beforeAll(async () => {
    const db: Db = await backends.find((b) => b.name === 'postgres')!.open();
    const auth = new FixedKeys();
    pro = await createAccount(db, auth, 'pro');
    await seedEvents(db, [makeEvent({ accountId: pro.principal.accountId, time: '2026-05-14T10:00:00Z' })]);
    api = await startApi(db, auth, new Date('2026-05-14T15:30:00Z'));
  });

  it('from=0000-01-01: 400 invalid_parameter in every format, never a 500 or a cut 200', async () => {
    for (const format of ['csv', 'jsonl', 'focus']) {
      for (const query of ['from=0000-01-01', 'from=0000-01-01&to=2026-06-01', 'from=1969-12-31']) {
        const r = await api.get(`/analytics/export?format=${format}&${query}`, pro.key);
        expect(r.status, `${format} ${query}`).toBe(400);
        expect(r.body).toMatchObject({ error: { code: 'invalid_parameter' } });
        expect((r.body as { error: { message: string } }).error.message).toMatch(
          /^from must be a UTC date YYYY-MM-DD from 1970-01-01 to 9999-12-31, got "(0000-01-01|1969-12-31)"$/,
        );
      }
    }
    const last = await api.get('/analytics/export?format=csv&from=9999-12-31', pro.key);
    expect(last.status).toBe(400);
    expect(last.text).toContain('from must be before 9999-12-31 when to is not given');
    for (const query of ['from=0000-01-01', 'to=0000-01-01T00:00:00Z']) {
      const r = await api.get(`/analytics/events?${query}`, pro.key);
      expect(r.status, query).toBe(400);
      expect(r.text).toContain('from 1970-01-01 to 9999-12-31');
    }
    const ok = await api.get('/analytics/export?format=csv&from=2026-05-14', pro.key);
    expect(ok.status).toBe(200);
    expect(ok.text.split('\r\n')).toHaveLength(3); // header, the event, the final CRLF
  });
});

describe('CSV cells', () => {
  it('a cell with a semicolon or TAB is quoted, so no separator starts a formula inside it', () => {
    expect(csvField('x;=HYPERLINK("http://evil.example","click")')).toBe(
      '"x;=HYPERLINK(""http://evil.example"",""click"")"',
    );
    expect(csvField('a\t=1+1')).toBe('"a\t=1+1"');
    expect(csvField('plain-model-name')).toBe('plain-model-name');
  });
});

describe('meter export --out', () => {
  it('a missing directory: one line on stderr, exit 1', { timeout: 60_000 }, async () => {
    const dir = tempDirAtFileEnd();
    const out = join(dir, 'missing-dir', 'x.csv');
    const r = await runCli(['export', '--account', 'acme', '--format', 'csv', '--out', out], {
      METER_DATA_DIR: dir,
    });
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(
      `meter: --out ${out}: cannot write there: the directory ${join(dir, 'missing-dir')} does not exist\n`,
    );
  });

  it('the file written aside has a random name and never follows a link planted beside it', async () => {
    const dir = tempDirAtFileEnd();
    const target = join(dir, 'usage.csv');
    const victim = join(dir, 'victim');
    writeFileSync(victim, 'precious');
    // The name the aside file used to have (`<file>.partial-<pid>`), a link to the victim.
    symlinkSync(victim, `${target}.partial-${process.pid}`);
    const aside = await openAside(target, '--out');
    expect(aside.path).not.toBe(`${target}.partial-${process.pid}`);
    expect(aside.path).toMatch(/\.partial-[0-9a-f]{16}$/);
    await aside.handle.writeFile('rows');
    await aside.commit();
    expect(readFileSync(target, 'utf8')).toBe('rows');
    expect(readFileSync(victim, 'utf8')).toBe('precious');
    expect(existsSync(aside.path)).toBe(false);
  });
});
