import { createRequire } from 'node:module';
import pino, { type DestinationStream, type Logger } from 'pino';

export type { Logger } from 'pino';

/** Where log lines go: stderr (stdout is for the one `meter listening on …` line and CLI
 *  output). pino JSON for a pipe, a file or a log collector; on a terminal, one readable line
 *  per entry (pino-pretty, loaded only then). */
function destination(terminal: boolean): DestinationStream {
  if (!terminal) return pino.destination({ fd: 2, sync: false });
  const pretty = createRequire(import.meta.url)('pino-pretty') as typeof import('pino-pretty');
  return pretty({
    destination: 2,
    sync: true,
    colorize: !process.env.NO_COLOR && process.env.TERM !== 'dumb',
    translateTime: 'SYS:HH:MM:ss.l',
    ignore: 'pid,hostname',
  });
}

/** Credentials are redacted wherever a header object is logged. */
export function createLogger(level: string, terminal = Boolean(process.stderr.isTTY)): Logger {
  return pino(
    {
      level,
      base: { pid: process.pid },
      redact: {
        paths: [
          '*.headers.authorization',
          '*.headers["x-meter-key"]',
          '*.headers["x-provider-authorization"]',
          '*.headers["x-api-key"]',
          '*.headers["x-goog-api-key"]',
          'databaseUrl',
          'smtpUrl',
        ],
        censor: '[redacted]',
      },
    },
    destination(terminal),
  );
}
