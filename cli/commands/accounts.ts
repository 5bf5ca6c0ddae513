import type { Command } from 'commander';
import { printJson, printTable, withStore } from '../context.js';

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
