import type { Command } from 'commander';
import { loadConfig } from '../../src/config.js';
import { TopData } from '../top/data.js';
import type { Figures } from '../top/derive.js';
import { figuresJson } from '../top/json.js';
import { frameLines, lineText } from '../top/layout.js';
import { openTopSource } from '../top-source.js';
import { UsageError } from '../context.js';

interface TopOpts {
  account?: string;
  interval: string;
  once?: boolean;
  json?: boolean;
}

const ALT_SCREEN_ON = '\u001B[?1049h';
const ALT_SCREEN_OFF = '\u001B[?1049l';

/** NO_COLOR (any non-empty value, no-color.org), a dumb terminal or no TTY: no colour. */
const useColor = () => Boolean(process.stdout.isTTY) && !process.env.NO_COLOR && process.env.TERM !== 'dumb';

/** One frame as plain text, the size of the terminal (80×24 without one). */
function textFrame(f: Figures): string {
  const width = process.stdout.columns || Number(process.env.COLUMNS) || 80;
  const height = process.stdout.rows || Number(process.env.LINES) + 1 || 25;
  return (
    frameLines(f, { width, height })
      .map((l) => lineText(l).trimEnd())
      .join('\n') + '\n'
  );
}

/** Ink clears a frame as tall as the terminal (after a shrink) with ESC[2J ESC[3J; on the
 *  alternate screen ESC[2J is enough, and ESC[3J would erase the user's scrollback. */
function withoutScrollbackErase(out: NodeJS.WriteStream): NodeJS.WriteStream {
  return new Proxy(out, {
    get(target, prop) {
      if (prop === 'write') {
        return (chunk: unknown, ...rest: unknown[]) =>
          (target.write as (...a: unknown[]) => boolean)(
            typeof chunk === 'string' ? chunk.replaceAll('\u001B[3J', '') : chunk,
            ...rest,
          );
      }
      const value = Reflect.get(target, prop, target) as unknown;
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
}

async function interactive(data: TopData, initial: Figures, intervalS: number): Promise<void> {
  // Ink renders nothing but the last frame when it believes it runs in CI (is-in-ci reads the
  // environment on import); on a real terminal the user wants the live view whatever CI says.
  delete process.env.CI;
  delete process.env.CONTINUOUS_INTEGRATION;
  const [{ render }, { createElement }, { TopApp }] = await Promise.all([
    import('ink'),
    import('react'),
    import('../top/app.js'),
  ]);
  process.stdout.write(ALT_SCREEN_ON);
  const app = render(createElement(TopApp, { data, initial, intervalS, color: useColor() }), {
    stdout: withoutScrollbackErase(process.stdout),
    exitOnCtrlC: true,
    patchConsole: false,
    maxFps: 10,
  });
  const stop = () => app.unmount();
  process.once('SIGTERM', stop);
  process.once('SIGHUP', stop);
  try {
    await app.waitUntilExit();
  } finally {
    process.off('SIGTERM', stop);
    process.off('SIGHUP', stop);
    process.stdout.write(ALT_SCREEN_OFF);
  }
}

/** No terminal (a pipe, a log): a text frame every interval, like `top -b`, until a signal. */
async function batch(data: TopData, first: Figures, intervalS: number): Promise<void> {
  let stopped = false;
  let wake: () => void = () => {};
  const stop = () => {
    stopped = true;
    wake();
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  try {
    process.stdout.write(textFrame(first));
    while (!stopped) {
      await new Promise<void>((r) => {
        wake = r;
        setTimeout(r, intervalS * 1000);
      });
      if (!stopped) process.stdout.write(`\n${textFrame(await data.refresh())}`);
    }
  } finally {
    process.off('SIGINT', stop);
    process.off('SIGTERM', stop);
  }
}

export function registerTop(program: Command): void {
  program
    .command('top')
    .description(
      "live view of an account's spend, fleet-wide: budget, burn rate, rates, latency, top models and tags, newest calls",
    )
    .option('--account <name>', 'the account (default: the first by name; `a` cycles through them)')
    .option('--interval <s>', 'seconds between refreshes, 0.2 to 3600', '1')
    .option('--once', 'print one frame as text (or the figures with --json) and exit')
    .option('--json', 'with --once: print the figures as JSON')
    .action(async (opts: TopOpts) => {
      const intervalS = Number(opts.interval);
      if (!/^\d+(\.\d+)?$/.test(opts.interval.trim()) || !(intervalS >= 0.2 && intervalS <= 3600)) {
        throw new UsageError(
          `--interval "${opts.interval}" is invalid: expected seconds from 0.2 to 3600 (e.g. 1 or 2.5)`,
        );
      }
      if (opts.json && !opts.once) {
        throw new UsageError(
          '--json needs --once: the live view is for a terminal, `--once --json` prints the figures',
        );
      }
      const data = new TopData(await openTopSource(loadConfig(process.env)), { account: opts.account, intervalS });
      try {
        await data.start();
        const first = await data.refresh();
        if (opts.once)
          process.stdout.write(opts.json ? `${figuresJson(first, process.stdout.isTTY ? 2 : 0)}\n` : textFrame(first));
        else if (process.stdout.isTTY && process.stdin.isTTY) await interactive(data, first, intervalS);
        else await batch(data, first, intervalS);
      } finally {
        await data.close();
      }
    });
}
