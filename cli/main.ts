#!/usr/bin/env node
import { Command, CommanderError } from 'commander';
import { registerAccounts } from './commands/accounts.js';
import { registerKeys } from './commands/keys.js';
import { registerAlerts } from './commands/alerts.js';
import { registerBudget } from './commands/budget.js';
import { registerMigrate } from './commands/migrate.js';
import { registerPlans } from './commands/plans.js';
import { registerPricing } from './commands/pricing.js';
import { registerStart } from './commands/start.js';
import { registerConfig } from './commands/config.js';
import { registerTop } from './commands/top.js';
import { exitCodeOf, oneLineErrors } from './usage.js';

const program = new Command('meter')
  .description('meter: a metering proxy for LLM APIs')
  .version(process.env.npm_package_version ?? '0.1.0')
  .exitOverride();

registerStart(program);
registerMigrate(program);
registerPricing(program);
registerPlans(program);
registerAccounts(program);
registerKeys(program);
registerBudget(program);
registerAlerts(program);
registerConfig(program);
registerTop(program);
oneLineErrors(program);

try {
  // A bare `meter` is a request for help, not a mistake.
  if (process.argv.length <= 2) program.outputHelp();
  else await program.parseAsync(process.argv);
} catch (err) {
  if (err instanceof CommanderError) {
    // --help and --version exit 0; everything else commander rejects is a usage error.
    process.exitCode = err.exitCode === 0 ? 0 : 2;
  } else {
    const e = err as Error;
    const debug = process.env.METER_DEBUG === '1' || process.env.METER_DEBUG === 'true';
    // One line (CONTRACT §1): a driver's multi-line message is joined, the stack only on request.
    const text = debug ? (e.stack ?? e.message) : String(e.message).replace(/\s*\n\s*/g, ' ').trim();
    process.stderr.write(`meter: ${text}\n`);
    process.exitCode = exitCodeOf(err);
  }
}
