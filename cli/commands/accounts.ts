import type { Command } from 'commander';
import { accountNameProblem } from '../../src/auth/accounts.js';
import { printJson, printTable, UsageError, withStore } from '../context.js';

export function registerAccounts(program: Command): void {
  const accounts = program
    .command('accounts')
    .description('accounts: the unit that keys, plans, budgets and analytics belong to');

  accounts
    .command('create <name>')
    .description('create an account (plan: free by default)')
    .option('--plan <plan>', 'free or pro', 'free')
    .option('--json', 'print the account as JSON')
    .action(async (name: string, opts: { plan: string; json?: boolean }) => {
      const problem = accountNameProblem(name); // a bad value: exit 2, before the store opens
      if (problem) throw new UsageError(problem);
      await withStore(async (store) => {
        const account = await store.call('accounts.create', { name, plan: opts.plan });
        if (opts.json) printJson({ name: account.name, plan: account.plan, created_at: account.created_at });
        else process.stdout.write(`created account ${account.name} (plan ${account.plan})\n`);
      });
    });

  accounts
    .command('list')
    .description('list accounts with their plan and number of working keys')
    .option('--json', 'print JSON')
    .action(async (opts: { json?: boolean }) => {
      await withStore(async (store) => {
        const rows = await store.call('accounts.list', {});
        if (opts.json) printJson(rows);
        else printTable(rows, ['name', 'plan', 'active_keys', 'created_at']);
      });
    });

  accounts
    .command('delete <name>')
    .description(
      'delete an account with its keys, budgets and alert channels (refused while it has live keys, unless --force); its usage events are kept, under no account',
    )
    .option('--force', 'delete it even while it has live keys: they stop working on every sidecar within seconds')
    .option('--json', 'print the result as JSON')
    .action(async (name: string, opts: { force?: boolean; json?: boolean }) => {
      await withStore(async (store) => {
        const r = await store.call('accounts.delete', { name, force: opts.force === true });
        if (opts.json) return printJson(r);
        process.stdout.write(
          `deleted account ${r.name} and its ${r.keys} key${r.keys === 1 ? '' : 's'} (they stop working on every sidecar within seconds); its ${r.events} usage event${r.events === 1 ? ' is' : 's are'} kept, under no account (see docs/security.md)\n`,
        );
      });
    });

  accounts
    .command('set-plan <name> <plan>')
    .description("change an account's plan (free or pro)")
    .option('--json', 'print the result as JSON')
    .action(async (name: string, plan: string, opts: { json?: boolean }) => {
      await withStore(async (store) => {
        const r = await store.call('accounts.setPlan', { name, plan });
        if (opts.json) printJson({ name: r.name, plan: r.plan, previous_plan: r.previous });
        else process.stdout.write(`account ${r.name}: plan ${r.previous} -> ${r.plan}\n`);
      });
    });
}
