import type { Command } from 'commander';
import { printable } from '../../src/printable.js';
import { loadConfig, maskUrlsIn, maskUrl, type Config } from '../../src/config.js';
import { formatPriceTable, Pricer } from '../../src/pricing/index.js';
import {
  activatePriceData,
  activePriceTable,
  fetchPriceData,
  loadSavedPriceData,
  PriceDataError,
  REMOTE_DATA_JSON_URL,
  removeSavedPriceData,
  savePriceData,
  type PriceTableInfo,
} from '../../src/pricing/price-data.js';
import { PROVIDER_SLUGS, type ProviderSlug } from '../../src/providers/index.js';
import type { CliStore } from '../../src/admin/client.js';
import { CliError, printJson, UsageError, withStore } from '../context.js';

/** How a command gets its store (tests pass one in). */
export type StoreRunner = <T>(fn: (store: CliStore, config: Readonly<Config>) => Promise<T>) => Promise<T>;

const out = (line: string) => process.stdout.write(`${printable(line)}\n`);

/** The table the daemon uses: the saved copy in METER_DATA_DIR when there is a good one. */
function useSavedTable(config: Readonly<Config>): void {
  try {
    const saved = loadSavedPriceData(config.dataDir);
    if (saved) activatePriceData(saved);
  } catch (err) {
    process.stderr.write(
      `meter: the saved price data in METER_DATA_DIR cannot be used (${(err as Error).message}); using the bundled catalogue\n`,
    );
  }
}

function tableJson(t: PriceTableInfo, config: Readonly<Config>, pricer: Pricer) {
  return {
    price_version: pricer.priceVersion,
    table: t.version,
    origin: t.origin,
    source: t.source ?? null,
    fetched_at: t.fetchedAt ?? null,
    models: t.origin === 'bundled' ? null : t.models,
    remote: config.pricesRemote ? maskUrl(config.pricesRemote) : null,
    prices_file: config.pricesFile ?? null,
  };
}

export function registerPricing(program: Command, run: StoreRunner = withStore): void {
  const pricing = program
    .command('pricing')
    .description('price tables (catalogue, downloaded price data, METER_PRICES_FILE) and re-pricing');
  pricing
    .command('show [provider] [model]')
    .description('which price table and version is in force; with a provider and model, the price of every billed unit')
    .option('--at <time>', 'price at this ISO date or time (dated and time-of-day prices)')
    .option('--json', 'print JSON')
    .action((provider: string | undefined, model: string | undefined, opts: { at?: string; json?: boolean }) => {
      if (provider !== undefined && model === undefined)
        throw new UsageError('give both a provider and a model, or neither');
      if (provider !== undefined && !(PROVIDER_SLUGS as readonly string[]).includes(provider)) {
        throw new UsageError(`unknown provider "${provider}": expected one of ${PROVIDER_SLUGS.join(', ')}`);
      }
      const at = opts.at ? new Date(opts.at) : new Date();
      if (Number.isNaN(at.getTime()))
        throw new UsageError(`--at "${opts.at}" is not an ISO date or time (e.g. 2026-11-21T14:00:00Z)`);
      const config = loadConfig();
      useSavedTable(config);
      const pricer = new Pricer({ pricesFile: config.pricesFile });
      if (provider === undefined || model === undefined) {
        const t = tableJson(activePriceTable(), config, pricer);
        if (opts.json) return printJson(t);
        out(`price version  ${t.price_version}`);
        out(
          `table          ${t.table} (${t.origin === 'bundled' ? 'bundled with meter' : `downloaded from ${t.source} at ${t.fetched_at}, ${t.models} models`})`,
        );
        out(`remote         ${t.remote ?? 'off (METER_PRICES_REMOTE unset)'}`);
        out(`prices file    ${t.prices_file ?? 'none (METER_PRICES_FILE unset)'}`);
        return;
      }
      const { text, json } = formatPriceTable(pricer, provider as ProviderSlug, model, at);
      // An unknown model is a failure (exit 1, one line on stderr); --json still prints the figures.
      if (!json.priced) {
        if (opts.json) printJson(json);
        throw new CliError(
          `no price for ${provider} ${model}: calls to it are recorded at cost 0 and flagged unpriced (add it to METER_PRICES_FILE)`,
        );
      }
      if (opts.json) printJson(json);
      else process.stdout.write(text.endsWith('\n') ? text : `${text}\n`);
    });

  pricing
    .command('update')
    .description(
      'fetch price data once (genai-prices data format), check it and keep it in METER_DATA_DIR; a running daemon uses it within a minute',
    )
    .option('--from <file-or-url>', `where to read it (default: METER_PRICES_REMOTE, else ${REMOTE_DATA_JSON_URL})`)
    .option('--reset', 'remove the saved copy: the bundled catalogue is used again')
    .option('--json', 'print JSON')
    .action(async (opts: { from?: string; reset?: boolean; json?: boolean }) => {
      if (opts.reset && opts.from) throw new UsageError('--reset and --from cannot be used together');
      const config = loadConfig();
      if (opts.reset) {
        const removed = removeSavedPriceData(config.dataDir);
        if (opts.json) printJson({ removed, table: activePriceTable().version });
        else
          out(
            removed
              ? `saved price data removed: the bundled catalogue (${activePriceTable().version}) is used`
              : 'no saved price data: the bundled catalogue is in use',
          );
        return;
      }
      const source = opts.from ?? config.pricesRemote ?? REMOTE_DATA_JSON_URL;
      let data;
      try {
        data = await fetchPriceData(source);
      } catch (err) {
        if (err instanceof PriceDataError)
          throw new CliError(
            `price data from ${maskUrlsIn(source)} not used: ${err.message}; the table in force is unchanged`,
          );
        throw err;
      }
      savePriceData(config.dataDir, data);
      activatePriceData(data);
      const t = tableJson(data.info, config, new Pricer({ pricesFile: config.pricesFile }));
      if (opts.json) return printJson(t);
      out(`price data ${t.table} saved (${t.models} models of the nine providers, from ${maskUrlsIn(source)})`);
      out(`price version now ${t.price_version}`);
    });

  pricing
    .command('reprice')
    .description(
      'price the calls recorded without a price (from their stored units), and their rollups, with the prices in force now',
    )
    .requiredOption('--since <date>', 'first day (UTC) or moment to look at, e.g. 2026-11-01')
    .option('--json', 'print JSON')
    .action(async (opts: { since: string; json?: boolean }) => {
      const since = parseSince(opts.since);
      await run(async (store, config) => {
        useSavedTable(config);
        // Through a running daemon's admin API on the embedded store, or directly.
        const report = await store.call(
          'pricing.reprice',
          { since: since.toISOString() },
          { pricesFile: config.pricesFile },
        );
        if (opts.json) return printJson(report);
        for (const c of report.changes)
          out(
            `repriced ${c.events} call${c.events === 1 ? '' : 's'} of ${c.provider} ${c.model} (as ${c.priced_as}): +$${c.cost}`,
          );
        out(
          `${report.repriced} of ${report.examined} unpriced call${report.examined === 1 ? '' : 's'} since ${report.since} priced with ${report.price_version}: +$${report.cost_added}${report.days.length ? ` on ${report.days.length} day${report.days.length === 1 ? '' : 's'} (${report.days[0]}…${report.days[report.days.length - 1]})` : ''}`,
        );
        for (const u of report.unpriced_models)
          out(`still no price: ${u.provider} ${u.model} (${u.events} call${u.events === 1 ? '' : 's'})`);
      });
    });
}

/** `2026-11-01` (UTC midnight) or an ISO timestamp. */
function parseSince(text: string): Date {
  const d = /^\d{4}-\d{2}-\d{2}$/.test(text) ? new Date(`${text}T00:00:00Z`) : new Date(text);
  if (Number.isNaN(d.getTime()) || !/^\d{4}-\d{2}-\d{2}/.test(text)) {
    throw new UsageError(`--since "${text}" is not a date: expected YYYY-MM-DD (UTC) or an ISO timestamp`);
  }
  return d;
}
