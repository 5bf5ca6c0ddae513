import type { Command } from 'commander';
import { printable } from '../../src/printable.js';
import type { ChannelKind } from '../../src/alerts/alert.js';
import { displayTarget, validateSecret, validateTarget } from '../../src/alerts/channels-admin.js';
import { CliError, printJson, printTable, UsageError, withStore, asUsage } from '../context.js';
import type { StoreRunner } from './budget.js';

const out = (line: string) => process.stdout.write(`${printable(line)}\n`);
const KIND_FLAGS = ['slack', 'teams', 'email', 'webhook'] as const satisfies readonly ChannelKind[];

interface AddOptions {
  account: string;
  slack?: string;
  teams?: string;
  email?: string;
  webhook?: string;
  secret?: string;
  json?: boolean;
}

export function registerAlerts(program: Command, run: StoreRunner = withStore): void {
  const alerts = program
    .command('alerts')
    .description('where budget alerts go: Slack, Microsoft Teams, e-mail, signed webhooks');

  alerts
    .command('add')
    .description('add an alert channel to an account (give exactly one of --slack, --teams, --email, --webhook)')
    .requiredOption('--account <name>', 'the account')
    .option('--slack <url>', 'Slack incoming-webhook URL')
    .option('--teams <url>', 'Microsoft Teams incoming-webhook (or Workflows) URL')
    .option('--email <address>', 'e-mail address (sent through METER_SMTP_URL)')
    .option('--webhook <url>', 'your HTTPS endpoint: signed JSON (Meter-Signature)')
    .option('--secret <secret>', 'webhook signing secret (16+ characters); default: generated and shown once')
    .option('--json', 'print {"id","account","kind","target","created_at"} (and "secret" when generated)')
    .action(async (opts: AddOptions) => {
      const given = KIND_FLAGS.filter((k) => opts[k] !== undefined);
      if (given.length !== 1)
        throw new UsageError('give exactly one of --slack URL, --teams URL, --email ADDR, --webhook URL');
      const kind = given[0]!;
      if (opts.secret !== undefined && kind !== 'webhook') throw new UsageError('--secret goes with --webhook only');
      const target = asUsage(() => validateTarget(kind, opts[kind]!));
      const secret = opts.secret === undefined ? undefined : asUsage(() => validateSecret(opts.secret!));
      await run(async (store, config) => {
        // Refused now rather than retried for 24 h: an e-mail channel needs an SMTP server.
        if (kind === 'email' && !config.smtpUrl) {
          throw new UsageError(
            '--email needs METER_SMTP_URL (e.g. smtp://user:pass@smtp.example.com:587): set it here and for every daemon, then add the channel again',
          );
        }
        const added = await store.call('alerts.add', { account: opts.account, kind, target, secret });
        const shown = { ...added, target: displayTarget(kind, added.target) };
        if (opts.json) return printJson(shown);
        out(`added ${kind} channel ${added.id} for ${added.account}: ${shown.target}`);
        if (added.secret) out(`signing secret (shown once; verify Meter-Signature with it): ${added.secret}`);
      });
    });

  alerts
    .command('list')
    .description('alert channels with their last delivery status (secrets are never shown)')
    .option('--account <name>', 'only this account')
    .option('--json', 'print JSON')
    .action(async (opts: { account?: string; json?: boolean }) => {
      await run(async (store) => {
        const rows = await store.call('alerts.list', { account: opts.account });
        if (opts.json) return printJson(rows);
        printTable(rows, ['id', 'account', 'kind', 'target', 'last_status', 'last_attempt_at', 'last_detail']);
      });
    });

  alerts
    .command('remove <id>')
    .description('remove an alert channel')
    .option('--json', 'print {"id","account","kind"}')
    .action(async (id: string, opts: { json?: boolean }) => {
      await run(async (store) => {
        const gone = await store.call('alerts.remove', { id });
        if (opts.json) return printJson({ id, account: gone.account, kind: gone.kind });
        out(`removed ${gone.kind} channel ${id} of ${gone.account}`);
      });
    });

  alerts
    .command('test')
    .description(
      "send a test message through each of the account's channels now; fails naming the channels that failed",
    )
    .requiredOption('--account <name>', 'the account')
    .option('--json', 'print [{"id","kind","ok","detail","duration_ms"}] (a failure still exits 1)')
    .action(async (opts: { account: string; json?: boolean }) => {
      await run(async (store, config) => {
        const results = await store.call('alerts.test', { account: opts.account }, { smtpUrl: config.smtpUrl });
        if (results.length === 0) {
          throw new CliError(
            `account ${opts.account} has no alert channels (add one with \`meter alerts add --account ${opts.account} …\`)`,
          );
        }
        if (opts.json) {
          printJson(results);
        } else {
          for (const r of results) {
            out(`${r.ok ? 'ok    ' : 'FAILED'}  ${r.kind.padEnd(7)}  ${r.id}  ${r.detail} (${r.duration_ms} ms)`);
          }
        }
        const failed = results.filter((r) => !r.ok);
        if (failed.length > 0) {
          throw new CliError(
            `alerts test: ${failed.length} of ${results.length} channels failed: ` +
              failed.map((r) => `${r.kind} ${r.id} (${r.detail})`).join('; '),
          );
        }
      });
    });
}
