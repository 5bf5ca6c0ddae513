import type { Command } from 'commander';
import { DAY_RANGE, isCalendarDay } from '../../src/calendar.js';
import { formatUnits } from '../../src/reconcile/amount.js';
import { reconciliationJson } from '../../src/reconcile/json.js';
import { runReconciliation } from '../../src/reconcile/run.js';
import {
  RECONCILABLE,
  type Figures,
  type MappingKind,
  type ReconcileProvider,
  type Reconciliation,
} from '../../src/reconcile/types.js';
import { printJson, printTable, UsageError, withStore } from '../context.js';
import type { StoreRunner } from './budget.js';

const out = (line: string): void => void process.stdout.write(`${line}\n`);
const MAX_DAYS = 366;

function provider(value: string | undefined): ReconcileProvider {
  if (!RECONCILABLE.includes(value as ReconcileProvider))
    throw new UsageError(
      `--provider "${value ?? ''}" is invalid: expected openai or anthropic (the providers with organisation usage and cost reports)`,
    );
  return value as ReconcileProvider;
}

function day(flag: string, value: string): string {
  if (!isCalendarDay(value))
    throw new UsageError(`${flag} "${value}" is invalid: expected a UTC date YYYY-MM-DD ${DAY_RANGE}`);
  return value;
}

/** --from (inclusive, default the month's first day) and --to (exclusive, default tomorrow). */
export function dateRange(opts: { from?: string; to?: string }, now = new Date()): { from: string; to: string } {
  const from = opts.from === undefined ? `${now.toISOString().slice(0, 7)}-01` : day('--from', opts.from);
  const to =
    opts.to === undefined ? new Date(now.getTime() + 86_400_000).toISOString().slice(0, 10) : day('--to', opts.to);
  const days = (Date.parse(to) - Date.parse(from)) / 86_400_000;
  if (days <= 0) throw new UsageError(`--to ${to} must be after --from ${from} (--to is exclusive)`);
  if (days > MAX_DAYS) throw new UsageError(`--from ${from} to --to ${to} is ${days} days: at most ${MAX_DAYS}`);
  return { from, to };
}

const usd = (n: bigint | null) => (n === null ? '-' : `$${formatUnits(n)}`);
const n = (v: bigint | null) => (v === null ? '-' : v.toString());
const pair = (p: Figures, m: Figures, k: keyof Figures) => `${n(p[k])}/${n(m[k])}`;

function printReport(r: Reconciliation): void {
  out(
    `${r.provider} ${r.account ? `account ${r.account}` : 'organisation (all accounts)'}, ${r.from} to ${r.to} (UTC, --to exclusive)`,
  );
  out('figures are provider/meter');
  printTable(
    r.days.map((d) => ({
      date: d.date,
      model: d.model,
      requests: pair(d.provider, d.meter, 'requests'),
      input: pair(d.provider, d.meter, 'input_tokens'),
      cached: pair(d.provider, d.meter, 'cached_input_tokens'),
      output: pair(d.provider, d.meter, 'output_tokens'),
      provider_cost: usd(d.provider.cost),
      meter_cost: usd(d.meter.cost),
      diff: usd(d.diff_usd),
      diff_pct: d.diff_pct === null ? '-' : `${d.diff_pct}%`,
    })),
    ['date', 'model', 'requests', 'input', 'cached', 'output', 'provider_cost', 'meter_cost', 'diff', 'diff_pct'],
  );
  const t = r.totals;
  out(
    `total    provider ${usd(t.provider_cost)}  meter ${usd(t.meter_cost)}  difference ${usd(t.diff_usd)}${t.diff_pct === null ? '' : ` (${t.diff_pct}%)`}`,
  );
  out(
    `tolerance: $${formatUnits(r.tolerance.usd)} or ${r.tolerance.pct}% per day and model (provider reports are rounded and bucketed by UTC day); days not yet settled get no findings`,
  );
  if (r.unattributed.length)
    out(
      `not compared: ${r.unattributed.length} provider charges of no model's tokens (tools, storage, fine-tuning), ${usd(r.unattributed.reduce((s, u) => s + u.cost, 0n))}`,
    );
  if (r.meter_left_out.length)
    out(
      `left out of meter's cost: ${usd(r.meter_left_out.reduce((s, u) => s + u.cost, 0n))} of calls the provider's cost report does not cover (Priority Tier)`,
    );
  if (r.findings.length === 0) return out('findings: none (every difference is within the tolerance)');
  out('findings:');
  for (const f of r.findings) out(`  ${f.kind.padEnd(11)} ${f.date} ${f.model}: ${f.detail}`);
}

const KINDS: Record<string, MappingKind> = { project: 'project', workspace: 'workspace', apiKey: 'api_key' };

function mappingTarget(p: ReconcileProvider, opts: { project?: string; workspace?: string; apiKey?: string }) {
  const given = Object.keys(KINDS).filter((k) => opts[k as keyof typeof opts] !== undefined);
  if (given.length !== 1)
    throw new UsageError(`give exactly one of ${p === 'openai' ? '--project' : '--workspace'} <id> or --api-key <id>`);
  const kind = KINDS[given[0]!]!;
  if (p === 'openai' && kind === 'workspace')
    throw new UsageError('--workspace is for anthropic; openai has --project');
  if (p === 'anthropic' && kind === 'project')
    throw new UsageError('--project is for openai; anthropic has --workspace');
  return { kind, id: opts[given[0] as keyof typeof opts]! };
}

export function registerReconcile(program: Command, run: StoreRunner = withStore): void {
  const reconcile = program
    .command('reconcile')
    .description(
      "meter's figures beside the provider's own usage and cost reports, per UTC day and model, with findings; map provider ids to accounts",
    );
  // `meter reconcile --provider …` runs `reconcile run`: the group itself has no options, so the
  // flags after `map` are map's own.
  reconcile
    .command('run', { isDefault: true })
    .description(
      "meter's figures beside the provider's own usage and cost reports, per UTC day and model, with findings (the default)",
    )
    .option(
      '--provider <name>',
      'openai or anthropic (admin key from METER_OPENAI_ADMIN_KEY / METER_ANTHROPIC_ADMIN_KEY)',
    )
    .option('--account <name>', "only this account's mapped projects, workspaces or API keys (see `reconcile map`)")
    .option('--from <date>', 'first UTC day, inclusive (default: the first day of this month)')
    .option('--to <date>', 'UTC day to stop before, exclusive (default: tomorrow)')
    .option('--json', 'print {"provider","from","to","tolerance","days","totals","findings"}')
    .action(async (opts: { provider?: string; account?: string; from?: string; to?: string; json?: boolean }) => {
      const p = provider(opts.provider);
      const range = dateRange(opts);
      await run(async (store, config) => {
        // A refused key, a provider that keeps failing, a missing key: a MeterError, exit 1 with its line.
        const report = await runReconciliation(store, { provider: p, account: opts.account, ...range, config });
        if (opts.json) printJson(reconciliationJson(report));
        else printReport(report);
      });
    });

  reconcile
    .command('map')
    .description('tie a provider project, workspace or API key id to a meter account')
    .requiredOption('--provider <name>', 'openai or anthropic')
    .option('--project <id>', 'an OpenAI project id (proj_…)')
    .option('--workspace <id>', 'an Anthropic workspace id (wrkspc_…)')
    .option('--api-key <id>', 'a provider API key id (key_… / apikey_…), not the key itself')
    .requiredOption('--account <name>', 'the meter account its traffic belongs to')
    .option('--json', 'print {"provider","kind","external_id","account_id","account"}')
    .action(
      async (opts: {
        provider: string;
        project?: string;
        workspace?: string;
        apiKey?: string;
        account: string;
        json?: boolean;
      }) => {
        const p = provider(opts.provider);
        const { kind, id } = mappingTarget(p, opts);
        await run(async (store) => {
          const m = await store.call('reconcile.map', { provider: p, kind, id, account: opts.account });
          if (opts.json) return printJson(m);
          out(`${p} ${kind.replace('_', ' ')} ${id} → account ${m.account}`);
        });
      },
    );

  reconcile
    .command('unmap')
    .description('remove the tie of a provider project, workspace or API key id to an account')
    .requiredOption('--provider <name>', 'openai or anthropic')
    .option('--project <id>', 'an OpenAI project id')
    .option('--workspace <id>', 'an Anthropic workspace id')
    .option('--api-key <id>', 'a provider API key id')
    .option('--json', 'print {"removed"}')
    .action(
      async (opts: { provider: string; project?: string; workspace?: string; apiKey?: string; json?: boolean }) => {
        const p = provider(opts.provider);
        const { kind, id } = mappingTarget(p, opts);
        await run(async (store) => {
          const removed = await store.call('reconcile.unmap', { provider: p, kind, id });
          if (opts.json) return printJson({ removed });
          out(
            removed
              ? `${p} ${kind.replace('_', ' ')} ${id} unmapped`
              : `${p} ${kind.replace('_', ' ')} ${id} was not mapped`,
          );
        });
      },
    );

  reconcile
    .command('mappings')
    .description('list which provider ids belong to which accounts')
    .option('--provider <name>', 'only openai or anthropic')
    .option('--json', 'print {"mappings":[{"provider","kind","external_id","account_id","account"}]}')
    .action(async (opts: { provider?: string; json?: boolean }) => {
      const p = opts.provider === undefined ? undefined : provider(opts.provider);
      await run(async (store) => {
        const mappings = await store.call('reconcile.mappings', { provider: p });
        if (opts.json) return printJson({ mappings });
        printTable(mappings as unknown as Record<string, unknown>[], ['provider', 'kind', 'external_id', 'account']);
      });
    });
}
