import type { Command } from 'commander';
import { describeConfig, unknownVariables, type ConfigEntry } from '../../src/config.js';
import { providers, PROVIDER_SLUGS } from '../../src/providers/index.js';
import { printJson, printTable } from '../context.js';

export function registerConfig(program: Command): void {
  program
    .command('config')
    .description('print the effective configuration (secrets masked) and where each value came from')
    .option('--json', 'print {"variables":[{"variable","value","source"}],"unknown":[{"name","suggestion"}]}')
    .action((opts: { json?: boolean }) => {
      const variables = describeConfig(process.env).map(withUpstreamDefault);
      const unknown = unknownVariables(process.env);
      if (opts.json) return printJson({ variables, unknown });
      printTable(variables, ['variable', 'value', 'source']);
      for (const u of unknown)
        process.stderr.write(`meter: warning: ${u.name} is not a meter setting (did you mean ${u.suggestion}?)\n`);
    });
}

/** An unset METER_UPSTREAM_<SLUG> is not "unset": calls go to the provider's public address. */
function withUpstreamDefault(e: ConfigEntry): ConfigEntry {
  const slug = PROVIDER_SLUGS.find((s) => e.variable === `METER_UPSTREAM_${s.toUpperCase()}`);
  return slug && e.source === 'unset' ? { ...e, value: providers[slug].defaultBaseUrl, source: 'default' } : e;
}
