import type { Command } from 'commander';
import { printable } from '../../src/printable.js';
import type { BudgetView } from '../../src/budget/admin.js';
import { parseBudgetUsd, raw, rawOrNull, type JsonValue } from '../../src/money.js';
import type { Config } from '../../src/config.js';
import type { CliStore } from '../../src/admin/client.js';
import { printJson, UsageError, withStore } from '../context.js';

/** How a command gets its store (tests pass one in). */
export type StoreRunner = <T>(fn: (store: CliStore, config: Readonly<Config>) => Promise<T>) => Promise<T>;

const out = (line: string) => process.stdout.write(`${printable(line)}\n`);

/** `{"account","month","budget","hard_cap","spend","utilization_pct","levels_fired"}`, money as exact numbers. */
export function budgetJson(v: BudgetView): JsonValue {
  return {
    account: v.account,
    month: v.month,
    budget: rawOrNull(v.budget),
    hard_cap: v.hard_cap,
    spend: raw(v.spend),
    utilization_pct: rawOrNull(v.utilization_pct),
    levels_fired: v.levels_fired,
  };
}

function printBudget(v: BudgetView): void {
  out(`account  ${v.account}`);
  out(`month    ${v.month} (UTC)`);
  out(`budget   ${v.budget === null ? 'none' : `$${v.budget} a month${v.hard_cap ? ', hard cap' : ''}`}`);
  out(`spend    $${v.spend}${v.utilization_pct === null ? '' : ` (${v.utilization_pct}%)`}`);
  out(
    `alerts   ${v.levels_fired.length ? `${v.levels_fired.map((l) => `${l}%`).join(', ')} fired this month` : 'none fired this month'}`,
  );
}

export function registerBudget(program: Command, run: StoreRunner = withStore): void {
  const budget = program
    .command('budget')
    .description('monthly budget in USD per account; alerts fire at 50, 80 and 100%');

  budget
    .command('set')
    .description("set an account's monthly budget (re-arms this month's alerts above the new utilisation)")
    .requiredOption('--account <name>', 'the account')
    .requiredOption('--monthly <usd>', 'monthly budget in USD, up to 8 decimals (e.g. 250 or 99.5)')
    .option('--hard-cap', 'refuse calls with 402 once the budget is reached (plans with a hard cap: Pro)')
    .option('--no-hard-cap', 'turn the hard cap off (without either flag, the cap stays as it is)')
    .option('--json', 'print the budget as `budget show --json` does')
    .action(async (opts: { account: string; monthly: string; hardCap?: boolean; json?: boolean }) => {
      const usd = parseBudgetUsd(opts.monthly);
      if (usd === undefined) {
        throw new UsageError(
          `--monthly "${opts.monthly}" is invalid: expected a USD amount greater than 0, ` +
            'at most 12 digits before the point and 8 after (e.g. 250 or 99.5)',
        );
      }
      await run(async (store) => {
        const result = await store.call('budget.set', {
          account: opts.account,
          monthlyUsd: usd,
          hardCap: opts.hardCap,
        });
        if (opts.json) return printJson(budgetJson(result.view));
        out(`budget of ${opts.account}: $${usd} a month${result.view.hard_cap ? ', hard cap on' : ''}`);
        if (result.rearmed.length) {
          out(
            `alerts at ${result.rearmed.map((l) => `${l}%`).join(', ')} will fire again when the new budget reaches them`,
          );
        }
      });
    });

  budget
    .command('show')
    .description("an account's budget, month-to-date spend and the alert levels fired this month")
    .requiredOption('--account <name>', 'the account')
    .option('--json', 'print {"account","month","budget","hard_cap","spend","utilization_pct","levels_fired"}')
    .action(async (opts: { account: string; json?: boolean }) => {
      await run(async (store) => {
        const view = await store.call('budget.show', { account: opts.account });
        if (opts.json) printJson(budgetJson(view));
        else printBudget(view);
      });
    });

  budget
    .command('clear')
    .description("remove an account's budget (and with it the hard cap and alerts)")
    .requiredOption('--account <name>', 'the account')
    .option('--json', 'print {"account","cleared"}')
    .action(async (opts: { account: string; json?: boolean }) => {
      await run(async (store) => {
        const cleared = await store.call('budget.clear', { account: opts.account });
        if (opts.json) return printJson({ account: opts.account, cleared });
        out(cleared ? `budget of ${opts.account} cleared` : `${opts.account} had no budget`);
      });
    });
}
