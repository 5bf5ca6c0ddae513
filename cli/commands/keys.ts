import type { Command } from 'commander';
import { parseDuration } from '../../src/auth/duration.js';
import { printJson, printTable, UsageError, withStore } from '../context.js';

const SHOWN_ONCE = 'store it now: it is shown only once';

export function registerKeys(program: Command): void {
  const keys = program.command('keys').description('service keys (mk_…) that applications send to the proxy');

  keys
    .command('create')
    .description('create a service key for an account and print it (once)')
    .requiredOption('--account <name>', 'the account the key belongs to')
    .option('--name <label>', 'a label to recognise the key by')
    .option('--json', 'print {"id","key","account","name","created_at"}')
    .action(async (opts: { account: string; name?: string; json?: boolean }) => {
      await withStore(async (store) => {
        const k = await store.call('keys.create', { account: opts.account, name: opts.name });
        if (opts.json) printJson({ id: k.id, key: k.key, account: k.account, name: k.name, created_at: k.created_at });
        else {
          process.stdout.write(`${k.key}\n`);
          process.stderr.write(`key ${k.id} for account ${k.account}: ${SHOWN_ONCE}\n`);
        }
      });
    });

  keys
    .command('list')
    .description('list keys (never their secrets)')
    .option('--account <name>', 'only this account')
    .option('--json', 'print JSON')
    .action(async (opts: { account?: string; json?: boolean }) => {
      await withStore(async (store) => {
        const rows = await store.call('keys.list', { account: opts.account });
        if (opts.json) printJson(rows);
        else printTable(rows, ['id', 'account', 'name', 'status', 'created_at', 'expires_at']);
      });
    });

  keys
    .command('revoke <id>')
    .description(
      'revoke a key (its id, or the full mk_… key): every sidecar refuses it within METER_KEY_REFRESH_MS (2 s by default)',
    )
    .option('--json', 'print the result as JSON')
    .action(async (id: string, opts: { json?: boolean }) => {
      await withStore(async (store) => {
        const r = await store.call('keys.revoke', { id });
        if (opts.json) printJson(r);
        else process.stdout.write(`revoked key ${r.id}\n`);
      });
    });

  keys
    .command('rotate <id>')
    .description(
      'create a replacement key (for an id, or the full mk_… key); the old one keeps working for the grace period',
    )
    .option('--grace <duration>', 'how long the old key keeps working: 30s, 15m, 1h, 2d, or 0', '1h')
    .option('--json', 'print {"id","key","account","name","created_at","replaces","old_expires_at"}')
    .action(async (id: string, opts: { grace: string; json?: boolean }) => {
      let grace: number;
      try {
        grace = parseDuration(opts.grace, '--grace');
      } catch (err) {
        throw new UsageError((err as Error).message);
      }
      await withStore(async (store) => {
        const k = await store.call('keys.rotate', { id, graceSeconds: grace });
        if (opts.json) printJson(k);
        else {
          process.stdout.write(`${k.key}\n`);
          process.stderr.write(
            `key ${k.id} replaces ${k.replaces}, which works until ${k.old_expires_at}: ${SHOWN_ONCE}\n`,
          );
        }
      });
    });
}
