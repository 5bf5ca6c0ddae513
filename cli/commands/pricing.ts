import type { Command } from 'commander';
import { loadConfig } from '../../src/config.js';
import { formatPriceTable, Pricer } from '../../src/pricing/index.js';
import { PROVIDER_SLUGS, type ProviderSlug } from '../../src/providers/types.js';
import { CliError, printJson, UsageError } from '../context.js';

export function registerPricing(program: Command): void {
  const pricing = program.command('pricing').description('price catalogue and METER_PRICES_FILE overrides');
  pricing
    .command('show <provider> <model>')
    .description('print the prices that would be used for a model, per token class (USD per million tokens)')
    .option('--at <time>', 'price at this ISO date or time (dated and time-of-day prices)')
    .option('--json', 'print JSON')
    .action((provider: string, model: string, opts: { at?: string; json?: boolean }) => {
      if (!(PROVIDER_SLUGS as readonly string[]).includes(provider)) {
        throw new UsageError(`unknown provider "${provider}": expected one of ${PROVIDER_SLUGS.join(', ')}`);
      }
      const at = opts.at ? new Date(opts.at) : new Date();
      if (Number.isNaN(at.getTime())) throw new UsageError(`--at "${opts.at}" is not an ISO date or time (e.g. 2026-11-21T14:00:00Z)`);
      const config = loadConfig();
      const { text, json } = formatPriceTable(new Pricer({ pricesFile: config.pricesFile }), provider as ProviderSlug, model, at);
      // An unknown model is a failure (exit 1, one line on stderr); --json still prints the figures.
      if (!json.priced) {
        if (opts.json) printJson(json);
        throw new CliError(`no price for ${provider} ${model}: calls to it are recorded at cost 0 and flagged unpriced (add it to METER_PRICES_FILE)`);
      }
      if (opts.json) printJson(json);
      else process.stdout.write(text.endsWith('\n') ? text : `${text}\n`);
    });
}
