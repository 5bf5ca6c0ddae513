import pino, { type Logger } from 'pino';

export type { Logger } from 'pino';

/** pino JSON on stderr (stdout is for the one `meter listening on …` line and CLI output).
 *  Credentials are redacted wherever a header object is logged. */
export function createLogger(level: string): Logger {
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
    pino.destination({ fd: 2, sync: false }),
  );
}
