#!/usr/bin/env node
import { CommanderError } from 'commander';
import { endQuietlyOnClosedOutput } from './closed-output.js';
import { buildProgram } from './program.js';
import { cliFailure } from '../src/errors.js';
import { restrictUmask } from '../src/store/private-files.js';

// Whatever meter writes (the embedded store's files, spool, logs of dead letters) is 0600/0700.
restrictUmask();

endQuietlyOnClosedOutput();
const program = buildProgram();

try {
  // A bare `meter` is a request for help, not a mistake.
  if (process.argv.length <= 2) program.outputHelp();
  else await program.parseAsync(process.argv);
} catch (err) {
  if (err instanceof CommanderError) {
    // --help and --version exit 0; everything else commander rejects is a usage error.
    process.exitCode = err.exitCode === 0 ? 0 : 2;
  } else {
    const { line, exitCode } = cliFailure(err, process.env.METER_DEBUG === '1' || process.env.METER_DEBUG === 'true');
    process.stderr.write(line);
    process.exitCode = exitCode;
  }
}
