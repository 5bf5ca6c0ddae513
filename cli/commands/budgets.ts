import type { Command } from 'commander';
import { printable } from '../../src/printable.js';
import { budgetViewJson, type BudgetView } from '../../src/budget/status.js';
import {
  parseAction,
  parseLevels,
  parseScope,
  parseTimeZone,
  parseWindow,
  scopeText,
  type BudgetAction,
  type Scope,
} from '../../src/budget/scope.js';
import type { WindowKind } from '../../src/calendar.js';
import { parseBudgetUsd } from '../../src/money.js';
import { printJson, printTable, UsageError, withStore } from '../context.js';
import type { StoreRunner } from './budget.js';

const out = (line: string) => process.stdout.write(`${printable(line)}\n`);

interface SpecFlags {
  amount?: string;
  scope?: string;
  window?: string;
  tz?: string;
  levels?: string;
  action?: string;
  strict?: boolean;
  json?: boolean;
}

/** The flags given, parsed: a bad value is a usage error (exit 2: BudgetSpecError, UsageError) before the store opens. */
function specOf(f: SpecFlags): {
  amount?: string;
  scope?: Scope;
  window?: WindowKind;
  timezone?: string;
  levels?: number[];
  action?: BudgetAction;
  strict?: boolean;
} {
  const amount = f.amount === undefined ? undefined : parseBudgetUsd(f.amount);
  if (f.amount !== undefined && amount === undefined) {
    throw new UsageError(
      `--amount "${f.amount}" is invalid: expected a USD amount greater than 0, at most 12 digits before the point and 8 after (e.g. 250 or 99.5)`,
    );
  }
  return {
    amount,
    scope: f.scope === undefined ? undefined : parseScope(f.scope),
    window: f.window === undefined ? undefined : parseWindow(f.window),
    timezone: f.tz === undefined ? undefined : parseTimeZone(f.tz),
    levels: f.levels === undefined ? undefined : parseLevels(f.levels),
    action: f.action === undefined ? undefined : parseAction(f.action),
    strict: f.strict,
  };
}

/** `budgets list`: one row per budget, its levels fired in the current window among them. */
const LIST_COLUMNS = [
  'id',
  'account',
  'scope',
  'window',
  'amount',
  'spend',
  'used',
  'fired',
  'action',
  'state',
] as const;

const rowOf = (v: BudgetView) => ({
  id: v.id,
  account: v.account,
  scope: scopeText({ kind: v.scope.kind as Scope['kind'], key: v.scope.key, value: v.scope.value }),
  window: `${v.window} ${v.timezone}`,
  amount: `$${v.amount}`,
  spend: `$${v.spend}`,
  used: `${v.utilization_pct}%`,
  fired: v.levels_fired.map((l) => `${l}%`).join(',') || '-',
  action: v.strict ? `${v.action} (strict)` : v.action,
  state: v.state,
});

function printBudget(v: BudgetView): void {
  const r = rowOf(v);
  out(`id       ${v.id}`);
  out(`account  ${v.account}`);
  out(`scope    ${r.scope}`);
  out(`window   ${v.window} in ${v.timezone}: ${v.window_start} to ${v.window_end}`);
  out(`amount   $${v.amount}`);
  out(`spend    $${v.spend} (${v.utilization_pct}%)`);
  out(
    `levels   ${v.levels.map((l) => `${l}%`).join(', ')}; fired this window: ${v.levels_fired.map((l) => `${l}%`).join(', ') || 'none'}`,
  );
  out(
    `action   ${v.action}${v.strict ? ' (strict)' : ''}; state ${v.state}${v.action === 'shadow' ? `; ${v.shadow_refusals} would-be refusals this window` : ''}`,
  );
}

const addSpecOptions = (c: Command, creating: boolean): Command =>
  c
    .option(
      '--scope <scope>',
      'account, key:<key-id>, tag:<key>=<value>, model:<model> or provider:<slug>' +
        (creating ? ' (default account)' : ''),
    )
    .option('--window <window>', 'day, week (from Monday), month or quarter' + (creating ? ' (default month)' : ''))
    .option('--tz <zone>', 'IANA time zone of the window, e.g. Europe/Berlin' + (creating ? ' (default UTC)' : ''))
    .option(
      '--levels <list>',
      'alert levels in percent, 1-10 of them between 1 and 1000' + (creating ? ' (default 50,80,100)' : ''),
    )
    .option(
      '--action <action>',
      'alert, block (refuse calls with 402; Pro) or shadow (count would-be refusals)' +
        (creating ? ' (default alert)' : ''),
    )
    .option(
      '--strict',
      "block and shadow: admit a call only when its own worst case fits in what is left (default: while anything is left; the call's worst case is then held)",
    )
    .option('--no-strict', 'admit calls while anything is left (the default)')
    .option('--json', 'print the budget as /analytics/budgets shows it');

export function registerBudgets(program: Command, run: StoreRunner = withStore): void {
  const budgets = program
    .command('budgets')
    .description('budgets of any scope (account, key, tag, model, provider), window and time zone');

  addSpecOptions(
    budgets
      .command('create')
      .description('create a budget')
      .requiredOption('--account <name>', 'the account')
      .requiredOption('--amount <usd>', 'amount in USD per window, up to 8 decimals'),
    true,
  ).action(async (opts: SpecFlags & { account: string }) => {
    const spec = specOf(opts);
    await run(async (store) => {
      const v = await store.call('budgets.create', { account: opts.account, ...spec, amount: spec.amount! });
      if (opts.json) return printJson(budgetViewJson(v));
      out(
        `created budget ${v.id}: $${v.amount} a ${v.window} (${v.timezone}) for ${rowOf(v).scope} of ${v.account}, action ${rowOf(v).action}`,
      );
    });
  });

  budgets
    .command('list')
    .description('every budget (of one account) with its spend in the current window')
    .option('--account <name>', 'only this account')
    .option('--json', 'print {"budgets":[…]} as /analytics/budgets does')
    .action(async (opts: { account?: string; json?: boolean }) => {
      await run(async (store) => {
        const list = await store.call('budgets.list', { account: opts.account });
        if (opts.json) return printJson({ budgets: list.map(budgetViewJson) });
        printTable(list.map(rowOf), LIST_COLUMNS);
      });
    });

  budgets
    .command('show <id>')
    .description('one budget: its window, spend, levels fired and state')
    .option('--json', 'print the budget as /analytics/budgets shows it')
    .action(async (id: string, opts: { json?: boolean }) => {
      await run(async (store) => {
        const v = await store.call('budgets.show', { id });
        if (opts.json) printJson(budgetViewJson(v));
        else printBudget(v);
      });
    });

  addSpecOptions(
    budgets
      .command('update <id>')
      .description('change only the flags given (levels already fired above the new utilisation fire again)')
      .option('--amount <usd>', 'amount in USD per window'),
    false,
  ).action(async (id: string, opts: SpecFlags) => {
    const spec = specOf(opts);
    if (Object.values(spec).every((v) => v === undefined)) {
      throw new UsageError(
        'budgets update: nothing to change: give --amount, --scope, --window, --tz, --levels, --action or --strict/--no-strict',
      );
    }
    await run(async (store) => {
      const v = await store.call('budgets.update', { id, ...spec });
      if (opts.json) return printJson(budgetViewJson(v));
      out(`updated budget ${v.id}`);
    });
  });

  budgets
    .command('delete <id>')
    .description('delete a budget (the account budget too: as `meter budget clear`)')
    .option('--json', 'print {"id","deleted"}')
    .action(async (id: string, opts: { json?: boolean }) => {
      await run(async (store) => {
        const r = await store.call('budgets.delete', { id });
        if (opts.json) return printJson(r);
        out(r.deleted ? `budget ${id} deleted` : `budget ${id} was already gone`);
      });
    });
}
