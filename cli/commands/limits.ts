import type { Command } from 'commander';
import type { AccountLimits } from '../../src/fleet/admin.js';
import { printJson, printTable, UsageError, withStore } from '../context.js';

/** A per-minute figure: a whole number, or `plan` to go back to the plan's. */
const figure = (flag: string) => (v: string) => {
  if (v === 'plan') return v;
  if (!/^\d+$/.test(v) || Number(v) < 1 || Number(v) > 2_000_000_000)
    throw new UsageError(`${flag} "${v}": expected a whole number from 1 to 2000000000, or "plan"`);
  return Number(v);
};

function print(l: AccountLimits): void {
  const p = l.plan_limits;
  const none = (n: number | null) => (n === null ? 'none' : String(n));
  process.stdout.write(
    `account ${l.account} (plan ${l.plan}): per key ${p.key_calls_per_minute} calls and ${none(p.key_tokens_per_minute)} tokens a minute; ` +
      `per account ${none(p.account_calls_per_minute)} calls and ${none(p.account_tokens_per_minute)} tokens a minute; ` +
      `${p.monthly_calls === null ? 'no monthly quota' : `${p.monthly_calls} calls a month`}\n`,
  );
  if (l.overrides.length === 0) return void process.stdout.write('no overrides\n');
  printTable(
    l.overrides.map((o) => ({
      applies_to: o.key_id === null ? 'account' : `key ${o.key_id}`,
      calls_per_minute: o.calls_per_minute ?? 'plan',
      tokens_per_minute: o.tokens_per_minute ?? 'plan',
    })),
    ['applies_to', 'calls_per_minute', 'tokens_per_minute'],
  );
}

export function registerLimits(program: Command): void {
  const limits = program
    .command('limits')
    .description("an account's or a key's own per-minute limits, in place of its plan's (fleet-wide)");
  limits
    .command('set')
    .description('override calls or tokens a minute for an account (all its keys together) or one key')
    .requiredOption('--account <name>', 'the account')
    .option('--key <id>', "one of the account's keys (meter keys list); without it, the account itself")
    .option('--calls-per-minute <n>', 'calls a minute, or "plan"', figure('--calls-per-minute'))
    .option('--tokens-per-minute <n>', 'input + output tokens a minute, or "plan"', figure('--tokens-per-minute'))
    .option('--json', 'print the account limits as `limits show --json` does')
    .action(
      async (opts: {
        account: string;
        key?: string;
        callsPerMinute?: number | 'plan';
        tokensPerMinute?: number | 'plan';
        json?: boolean;
      }) => {
        if (opts.callsPerMinute === undefined && opts.tokensPerMinute === undefined)
          throw new UsageError(
            'nothing to change: give --calls-per-minute or --tokens-per-minute (a number or "plan")',
          );
        await withStore(async (store) => {
          const l = await store.call('limits.set', {
            account: opts.account,
            ...(opts.key ? { key: opts.key } : {}),
            ...(opts.callsPerMinute !== undefined ? { callsPerMinute: opts.callsPerMinute } : {}),
            ...(opts.tokensPerMinute !== undefined ? { tokensPerMinute: opts.tokensPerMinute } : {}),
          });
          if (opts.json) printJson(l);
          else print(l);
        });
      },
    );
  limits
    .command('show')
    .description("an account's plan limits and its overrides")
    .requiredOption('--account <name>', 'the account')
    .option('--json', 'print JSON')
    .action(async (opts: { account: string; json?: boolean }) => {
      await withStore(async (store) => {
        const l = await store.call('limits.show', { account: opts.account });
        if (opts.json) printJson(l);
        else print(l);
      });
    });
}
