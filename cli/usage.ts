import type { Command } from 'commander';
import { didYouMean } from '../src/config.js';
import { UsageError } from './context.js';

/** `meter keys create`: the command's full name, as a user types it. */
function fullName(cmd: Command): string {
  const names: string[] = [];
  for (let c: Command | null = cmd; c; c = c.parent) names.unshift(c.name());
  return names.join(' ');
}

/**
 * CONTRACT §1: a failure is ONE line on stderr. Commander's usage errors (unknown option,
 * missing argument) become `meter: … (see \`meter keys create --help\`)` instead of the error
 * followed by the whole help text, and a command group given no or an unknown subcommand says
 * which ones exist instead of printing its help to stderr. Call after every command is registered.
 */
export function oneLineErrors(cmd: Command): void {
  const name = fullName(cmd);
  cmd.showHelpAfterError(false);
  cmd.configureOutput({
    outputError: (str, write) => {
      const message = str
        .replace(/^error: /, '')
        .replace(/\s+/g, ' ')
        .trim();
      write(`meter: ${message} (see \`${name} --help\`)\n`);
    },
  });
  const subs = cmd.commands.map((c) => c.name());
  if (subs.length > 0) {
    // Subcommands (and `help`, kept: an action would hide it) are dispatched before this
    // action runs, so it only sees what matched none.
    cmd
      .helpCommand(true)
      .allowExcessArguments()
      .action((_opts: unknown, self: Command) => {
        const [given] = self.args;
        const near = given === undefined ? undefined : didYouMean(given, subs);
        const what =
          given === undefined
            ? 'missing command'
            : `unknown command ${JSON.stringify(given)}${near ? ` (did you mean ${near}?)` : ''}`;
        throw new UsageError(`${what} for \`${name}\`: expected one of ${subs.join(', ')} (see \`${name} --help\`)`);
      });
  }
  for (const sub of cmd.commands) oneLineErrors(sub);
}

export { exitCodeOf } from '../src/errors.js';
