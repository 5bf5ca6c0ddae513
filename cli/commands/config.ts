import type { Command } from 'commander';
import { describeConfig, unknownVariables } from '../../src/config.js';
import { printJson, printTable } from '../context.js';

export function registerConfig(program: Command): void {
  program
    .command('config')
    .description('print the effective configuration (secrets masked) and where each value came from')
    .option('--json', 'print {"variables":[{"variable","value","source"}],"unknown":[{"name","suggestion"}]}')
    .action((opts: { json?: boolean }) => {
      const variables = describeConfig(process.env);
      const unknown = unknownVariables(process.env);
      if (opts.json) return printJson({ variables, unknown });
      printTable(variables, ['variable', 'value', 'source']);
      for (const u of unknown)
        process.stderr.write(`meter: warning: ${u.name} is not a meter setting (did you mean ${u.suggestion}?)\n`);
    });
}
