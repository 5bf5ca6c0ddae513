import { Command } from 'commander';
import { registerAccounts } from './commands/accounts.js';
import { registerKeys } from './commands/keys.js';
import { registerAlerts } from './commands/alerts.js';
import { registerBudget } from './commands/budget.js';
import { registerBudgets } from './commands/budgets.js';
import { registerMigrate } from './commands/migrate.js';
import { registerLimits } from './commands/limits.js';
import { registerPlans } from './commands/plans.js';
import { registerPricing } from './commands/pricing.js';
import { registerStart } from './commands/start.js';
import { registerConfig } from './commands/config.js';
import { registerExport } from './commands/export.js';
import { registerTop } from './commands/top.js';
import { registerReconcile } from './commands/reconcile.js';
import { registerBilling } from './commands/billing.js';
import { oneLineErrors } from './usage.js';

/** The `meter` command tree (every command registered, one-line errors set up), not yet parsed. */
export function buildProgram(): Command {
  const program = new Command('meter')
    .description('meter: a metering proxy for LLM APIs')
    .version(process.env.npm_package_version ?? '0.1.0')
    .exitOverride();

  registerStart(program);
  registerMigrate(program);
  registerPricing(program);
  registerPlans(program);
  registerLimits(program);
  registerAccounts(program);
  registerKeys(program);
  registerBudget(program);
  registerBudgets(program);
  registerAlerts(program);
  registerConfig(program);
  registerTop(program);
  registerReconcile(program);
  registerBilling(program);
  registerExport(program);
  oneLineErrors(program);
  return program;
}
