import type { Command } from 'commander';
import type { AdminArgs } from '../../src/admin/commands.js';
import { PLAN_ANALYTICS, type Plan, type PlanEdits } from '../../src/plans/plans.js';
import { printJson, printTable, UsageError, withStore } from '../context.js';

const ANALYTICS: readonly string[] = PLAN_ANALYTICS;

const positive = (flag: string) => (v: string) => {
  if (!/^\d+$/.test(v) || Number(v) < 1 || Number(v) > 2_000_000_000)
    throw new UsageError(`${flag} "${v}": expected a whole number from 1 to 2000000000`);
  return Number(v);
};

const orUnlimited = (flag: string) => (v: string) => (v === 'unlimited' ? v : positive(flag)(v));

function toRow(p: Plan) {
  return {
    name: p.name,
    monthly_calls: p.monthlyCallQuota,
    max_keys: p.maxActiveKeys,
    retention_days: p.rawRetentionDays,
    rollup_months: p.rollupRetentionMonths,
    rate_limit_per_min: p.rateLimitPerMinute,
    tokens_per_min: p.tokensPerMinute,
    account_calls_per_min: p.accountCallsPerMinute,
    account_tokens_per_min: p.accountTokensPerMinute,
    analytics: p.analytics,
    hard_cap: p.hardCap,
  };
}

export function registerPlans(program: Command): void {
  const plans = program.command('plans').description('plan limits (Free and Pro): list and change them');
  plans
    .command('list')
    .description('print every plan and its limits')
    .option('--json', 'print JSON')
    .action(async (opts: { json?: boolean }) => {
      await withStore(async (store) => {
        const rows = (await store.call('plans.list', {})).map(toRow);
        if (opts.json) printJson(rows);
        else
          printTable(
            rows.map((r) => ({
              ...r,
              monthly_calls: r.monthly_calls ?? 'unlimited',
              tokens_per_min: r.tokens_per_min ?? 'none',
              account_calls_per_min: r.account_calls_per_min ?? 'none',
              account_tokens_per_min: r.account_tokens_per_min ?? 'none',
              analytics: r.analytics.join(','),
            })),
            [
              'name',
              'monthly_calls',
              'max_keys',
              'retention_days',
              'rollup_months',
              'rate_limit_per_min',
              'tokens_per_min',
              'account_calls_per_min',
              'account_tokens_per_min',
              'analytics',
              'hard_cap',
            ],
          );
      });
    });
  plans
    .command('set <plan>')
    .description("change a plan's limits; every sidecar applies them within seconds")
    .option('--monthly-calls <n>', 'proxied calls a month, or "unlimited"', orUnlimited('--monthly-calls'))
    .option('--max-keys <n>', 'active service keys per account', positive('--max-keys'))
    .option('--retention-days <n>', 'days raw events are kept', positive('--retention-days'))
    .option('--rollup-months <n>', 'months daily rollups are kept', positive('--rollup-months'))
    .option('--rate-limit <n>', 'calls a minute per key', positive('--rate-limit'))
    .option(
      '--tokens-per-minute <n>',
      'input + output tokens a minute per key, or "unlimited"',
      orUnlimited('--tokens-per-minute'),
    )
    .option(
      '--account-calls-per-minute <n>',
      'calls a minute per account (all its keys), or "unlimited"',
      orUnlimited('--account-calls-per-minute'),
    )
    .option(
      '--account-tokens-per-minute <n>',
      'tokens a minute per account (all its keys), or "unlimited"',
      orUnlimited('--account-tokens-per-minute'),
    )
    .option(
      '--analytics <list>',
      `analytics endpoints included, comma-separated: ${ANALYTICS.join(',')}`,
      (v: string) => {
        const list = v
          .split(',')
          .map((s) => s.trim())
          .filter(Boolean);
        const bad = list.filter((s) => !ANALYTICS.includes(s));
        if (bad.length)
          throw new UsageError(`--analytics: unknown endpoint ${bad.join(', ')}; allowed: ${ANALYTICS.join(', ')}`);
        return list;
      },
    )
    .option('--hard-cap <yes|no>', 'whether accounts on the plan may set a hard spending cap', (v: string) => {
      if (v !== 'yes' && v !== 'no') throw new UsageError(`--hard-cap "${v}": expected yes or no`);
      return v === 'yes';
    })
    .option('--json', 'print the plan as `plans list --json` does')
    .action(async (name: string, opts: PlanEdits & { json?: boolean }) => {
      const { json, ...edits } = opts;
      if (Object.values(edits).every((v) => v === undefined)) {
        throw new UsageError(
          'nothing to change: give at least one of --monthly-calls, --max-keys, --retention-days, --rollup-months, --rate-limit, --tokens-per-minute, --account-calls-per-minute, --account-tokens-per-minute, --analytics, --hard-cap',
        );
      }
      await withStore(async (store) => {
        await store.call('plans.set', { ...(edits as Omit<AdminArgs<'plans.set'>, 'plan'>), plan: name });
        if (json) printJson(toRow((await store.call('plans.list', {})).find((p) => p.name === name)!));
        else process.stdout.write(`plan ${name} updated\n`);
      });
    });
}
