/**
 * The daemon with the proxy alone (no metering, budgets, analytics): what `npm run bench`
 * compares the shipped daemon against, to tell the proxy's own cost from the metering's.
 * Prints `meter listening on URL` like `meter start`.
 */
import pino from 'pino';
import { loadConfig } from '../src/config.js';
import { proxyComponent } from '../src/proxy/component.js';
import { startDaemon } from '../src/server/daemon.js';

const daemon = await startDaemon(loadConfig(), pino({ level: 'warn' }, pino.destination(2)), async (ctx, start) =>
  start(await proxyComponent(ctx)),
);
process.stdout.write(`meter listening on ${daemon.url}\n`);
process.once('SIGTERM', () => void daemon.close().then(() => process.exit(0)));
