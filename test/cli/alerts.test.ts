import { beforeAll, expect, it } from 'vitest';
import type { StoreRunner } from '../../cli/commands/budget.js';
import type { Db } from '../../src/store/types.js';
import { cliStore, runCli } from '../alerts/helpers/cli.js';
import { httpReceiver, smtpReceiver, type HttpReceiver } from '../alerts/helpers/receivers.js';
import { createAccount } from '../budget/helpers/seed.js';
import { describeEachBackend } from '../helpers/stores.js';

describeEachBackend('meter alerts', (backend) => {
  let db: Db;
  let run: StoreRunner;
  let slack: HttpReceiver;
  let webhook: HttpReceiver;
  let smtpPort: number;
  const meter = (...args: string[]) => runCli(args, run);
  const ids: Record<string, string> = {};

  beforeAll(async () => {
    slack = await httpReceiver();
    webhook = await httpReceiver(() => 500);
    smtpPort = (await smtpReceiver('meter', 'smtp-pass-123')).port;
    ({ db, run } = await cliStore(backend, { METER_SMTP_URL: `smtp://meter:smtp-pass-123@127.0.0.1:${smtpPort}` }));
    await createAccount(db, 'acme', 'free');
    await createAccount(db, 'quiet', 'free');
  });

  it('add: one channel of each kind; a webhook secret is generated and shown once', async () => {
    const s = await meter(
      'alerts',
      'add',
      '--account',
      'acme',
      '--slack',
      `${slack.url}/services/T01/B02/hush`,
      '--json',
    );
    expect(s.code).toBe(0);
    const added = JSON.parse(s.stdout) as { id: string; kind: string; target: string; secret?: string };
    expect(added).toMatchObject({ account: 'acme', kind: 'slack', target: `${slack.url}/services/…` });
    expect(added.secret).toBeUndefined();
    ids.slack = added.id;

    const w = await meter('alerts', 'add', '--account', 'acme', '--webhook', `${webhook.url}/meter`);
    expect(w.code).toBe(0);
    const m =
      /^added webhook channel ([0-9a-f]{12}) for acme: .*\nsigning secret \(shown once; verify Meter-Signature with it\): (whsec_\S+)\n$/.exec(
        w.stdout,
      );
    expect(m).not.toBeNull();
    ids.webhook = m![1]!;
    ids.generatedSecret = m![2]!;

    const e = await meter('alerts', 'add', '--account', 'acme', '--email', 'ops@example.com');
    expect(e.stdout).toMatch(/^added email channel [0-9a-f]{12} for acme: ops@example.com\n$/);
    ids.email = e.stdout.split(' ')[3]!;
    const t = await meter('alerts', 'add', '--account', 'quiet', '--teams', `${slack.url}/webhookb2/x`, '--json');
    ids.teams = (JSON.parse(t.stdout) as { id: string }).id;
    const own = await meter(
      'alerts',
      'add',
      '--account',
      'quiet',
      '--webhook',
      `${slack.url}/own`,
      '--secret',
      'my-own-secret-0123456789',
    );
    expect(own.stdout).not.toContain('my-own-secret');
  });

  it('add refuses what it cannot use, in one line naming the problem', async () => {
    const cases: [string[], string][] = [
      [
        ['--slack', 'http://127.0.0.1:1/a', '--email', 'a@b.co'],
        'give exactly one of --slack URL, --teams URL, --email ADDR, --webhook URL',
      ],
      [[], 'give exactly one of --slack URL, --teams URL, --email ADDR, --webhook URL'],
      [
        ['--slack', 'hooks.slack.com/x'],
        '--slack "hooks.slack.com/x" is not a valid URL (expected an http:// or https:// address)',
      ],
      [
        ['--webhook', 'ftp://127.0.0.1/x'],
        '--webhook "ftp://127.0.0.1/x" is not a valid URL (expected an http:// or https:// address)',
      ],
      [['--email', 'not-an-address'], '--email "not-an-address" is not an e-mail address (expected name@example.com)'],
      [['--teams', 'http://127.0.0.1:1/t', '--secret', 'x'.repeat(20)], '--secret goes with --webhook only'],
      [
        ['--webhook', 'http://127.0.0.1:1/w', '--secret', 'short'],
        '--secret must be at least 16 characters without spaces',
      ],
    ];
    for (const [flags, message] of cases) {
      expect(await meter('alerts', 'add', '--account', 'acme', ...flags)).toMatchObject({
        code: 2,
        stderr: `meter: ${message}\n`,
      });
    }
    expect(await meter('alerts', 'add', '--account', 'nope', '--email', 'a@b.co')).toMatchObject({
      code: 1,
      stderr: 'meter: unknown account "nope" (see `meter accounts list`)\n',
    });
  });

  it('test sends through every channel now, exits non-zero naming the failed ones; list shows each last status', async () => {
    const r = await meter('alerts', 'test', '--account', 'acme');
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(new RegExp(`^ok {6}slack {4}${ids.slack}  HTTP 200 \\(\\d+ ms\\)$`, 'm'));
    expect(r.stdout).toMatch(new RegExp(`^ok {6}email {4}${ids.email}  SMTP 250 \\(\\d+ ms\\)$`, 'm'));
    expect(r.stdout).toMatch(new RegExp(`^FAILED  webhook  ${ids.webhook}  HTTP 500: receiver says no`, 'm'));
    expect(r.stderr).toBe(
      `meter: alerts test: 1 of 3 channels failed: webhook ${ids.webhook} (HTTP 500: receiver says no)\n`,
    );
    // The webhook test message is signed and shaped like a real alert, typed as a test.
    const body = JSON.parse(webhook.received[0]!.body) as Record<string, unknown>;
    expect(body).toMatchObject({ type: 'budget.test', account: 'acme', level: null, spend: 0, budget: null });
    expect(webhook.received[0]!.headers['meter-signature']).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);

    const list = await meter('alerts', 'list', '--account', 'acme', '--json');
    const rows = JSON.parse(list.stdout) as { id: string; last_status: string; last_detail: string }[];
    expect(Object.fromEntries(rows.map((x) => [x.id, [x.last_status, x.last_detail]]))).toEqual({
      [ids.slack!]: ['delivered', 'HTTP 200'],
      [ids.email!]: ['delivered', 'SMTP 250'],
      [ids.webhook!]: ['failed', 'HTTP 500: receiver says no'],
    });
    const json = await meter('alerts', 'test', '--account', 'acme', '--json');
    expect(json.code).toBe(1);
    const results = JSON.parse(json.stdout) as unknown[];
    expect(results).toHaveLength(3);
    expect(results).toEqual(
      expect.arrayContaining([
        { id: ids.slack, kind: 'slack', ok: true, detail: 'HTTP 200', duration_ms: expect.any(Number) },
        { id: ids.email, kind: 'email', ok: true, detail: 'SMTP 250', duration_ms: expect.any(Number) },
        {
          id: ids.webhook,
          kind: 'webhook',
          ok: false,
          detail: 'HTTP 500: receiver says no',
          duration_ms: expect.any(Number),
        },
      ]),
    );
    expect(json.stderr).toContain(`1 of 3 channels failed: webhook ${ids.webhook}`);
    webhook.respond = () => 200;
    expect(await meter('alerts', 'test', '--account', 'acme')).toMatchObject({ code: 0, stderr: '' });
  });

  it('list never prints secrets; Slack and Teams addresses are shortened', async () => {
    for (const args of [
      ['alerts', 'list'],
      ['alerts', 'list', '--json'],
    ]) {
      const r = await meter(...args);
      expect(r.code).toBe(0);
      expect(r.stdout).not.toContain(ids.generatedSecret!);
      expect(r.stdout).not.toContain('my-own-secret');
      expect(r.stdout).not.toContain('hush');
      expect(r.stdout).toContain(ids.teams!);
    }
    expect(await meter('alerts', 'list', '--account', 'nope')).toMatchObject({ code: 1 });
  });

  it('remove deletes a channel; unknown ids and accounts without channels are errors', async () => {
    expect((await meter('alerts', 'remove', ids.teams!)).stdout).toBe(`removed teams channel ${ids.teams} of quiet\n`);
    expect(await meter('alerts', 'remove', ids.teams!)).toMatchObject({
      code: 1,
      stderr: `meter: no alert channel with id "${ids.teams}" (see \`meter alerts list\`)\n`,
    });
    await createAccount(db, 'empty', 'free');
    expect(await meter('alerts', 'test', '--account', 'empty')).toMatchObject({ code: 1 });
    expect((await meter('alerts', 'test', '--account', 'empty')).stderr).toContain(
      'account empty has no alert channels',
    );
  });
});
