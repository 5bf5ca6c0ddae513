/**
 * meter top for real: a daemon on the embedded store (top must go through it), calls made with
 * the official OpenAI SDK, `meter top --once --json`, and the live view in a tmux pseudo-terminal
 * that sees new calls arrive, answers its keys, follows a resize, and quits restoring the terminal.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { packageRoot } from '../../src/paths.js';
import { components } from '../../src/server/components.js';
import { startDaemon, type Daemon } from '../../src/server/daemon.js';
import pino from 'pino';
import { atFileEnd, tempDirAtFileEnd } from '../helpers/cleanup.js';
import { runCli } from '../helpers/cli.js';
import { answerChat, eventually, openaiVia } from '../helpers/fleet.js';
import { startFakeUpstream } from '../helpers/upstreams.js';
import { hasTool } from '../helpers/tools.js';

const hasTmux = hasTool('tmux', 'apt-get install tmux');

const run = promisify(execFile);
const socket = `meter-top-${randomBytes(4).toString('hex')}`;
const tmux = async (...args: string[]) => (await run('tmux', ['-L', socket, ...args])).stdout;
const screen = () => tmux('capture-pane', '-p', '-t', 'top');
const shellQuote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

describe('meter top end to end', () => {
  let daemon: Daemon;
  let env: Record<string, string>;
  let key: string;
  const call = (tags: string) =>
    openaiVia(daemon, key).chat.completions.create(
      { model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] },
      { headers: { 'x-metering-tags': tags } },
    );

  beforeAll(async () => {
    const upstream = await startFakeUpstream();
    answerChat(upstream, { prompt: 1000, completion: 200 });
    const dataDir = tempDirAtFileEnd();
    env = { DATABASE_URL: '', METER_DATA_DIR: dataDir };
    daemon = await startDaemon(
      loadConfig({
        METER_PORT: '0',
        METER_DATA_DIR: dataDir,
        METER_UPSTREAM_OPENAI: `${upstream.origin}/v1`,
        METER_FLUSH_INTERVAL_MS: '100',
      }),
      pino({ level: 'silent' }),
      components,
    );
    atFileEnd(() => daemon.close());
    expect((await runCli(['accounts', 'create', 'acme', '--plan', 'pro'], env)).code).toBe(0);
    const created = await runCli(['keys', 'create', '--account', 'acme', '--json'], env);
    key = (JSON.parse(created.stdout) as { key: string }).key;
    for (let i = 0; i < 3; i++) await call('team=search,env=e2e');
  }, 120_000);

  it('prints the figures once as JSON, exact, from the daemon', { timeout: 120_000 }, async () => {
    let figures:
      | {
          month: { requests: number; spend: number };
          tail: { cost: number; tags: Record<string, string>; status: number }[];
        }
      | undefined;
    let text = '';
    await eventually(
      async () => {
        const out = await runCli(['top', '--once', '--json'], env);
        expect(out.code).toBe(0);
        text = out.stdout;
        figures = JSON.parse(text) as typeof figures;
        return figures!.month.requests === 3;
      },
      60_000,
      'three calls in meter top --once --json',
    );
    expect(figures!.tail).toHaveLength(3);
    expect(figures!.tail[0]).toMatchObject({ status: 200, tags: { team: 'search', env: 'e2e' } });
    // The month's spend is written from the exact decimal: three times one call's cost.
    const cost = /"tail":\[\{[^}]*"cost":([\d.]+)/.exec(text)![1]!;
    const spend = /"month":\{[^}]*"spend":([\d.]+)/.exec(text)![1]!;
    const units = (d: string) => BigInt(d.split('.')[0]!) * 10n ** 8n + BigInt((d.split('.')[1] ?? '').padEnd(8, '0'));
    expect(units(cost)).toBeGreaterThan(0n);
    expect(units(spend)).toBe(units(cost) * 3n);

    const frame = await runCli(['top', '--once'], env); // no TTY: one text frame, no colour
    expect(frame.code).toBe(0);
    expect(frame.stdout).toContain('meter top  acme (pro)');
    expect(frame.stdout).not.toContain('\u001B[');
  });

  it(
    'refuses bad options with exit 2, and says how to start a daemon when none runs',
    { timeout: 60_000 },
    async () => {
      const bad = await runCli(['top', '--interval', '0'], env);
      expect(bad.code).toBe(2);
      expect(bad.stderr.trim().split('\n')).toHaveLength(1);
      expect(bad.stderr).toContain('--interval "0" is invalid');
      const none = await runCli(['top', '--once'], { DATABASE_URL: '', METER_DATA_DIR: tempDirAtFileEnd() });
      expect(none.code).toBe(1);
      expect(none.stderr).toMatch(/no meter daemon is running .* start one with `meter start`/);
    },
  );

  it.skipIf(!hasTmux)(
    'runs live in a terminal: new calls appear, keys work, NO_COLOR holds, a resize redraws, q restores the terminal',
    { timeout: 180_000 },
    async () => {
      const vars = Object.entries({ ...env, METER_LOG_LEVEL: 'silent', NO_COLOR: '1' })
        .map(([k, v]) => `${k}=${shellQuote(v)}`)
        .join(' ');
      const command =
        `echo BEFORE; env ${vars} ${shellQuote(process.execPath)} --import tsx cli/main.ts top --interval 0.5; ` +
        'echo EXIT=$?; stty -a | grep -o -- "-\\?icanon"; sleep 300';
      await tmux('new-session', '-d', '-s', 'top', '-x', '80', '-y', '24', '-c', packageRoot, command);
      atFileEnd(() => tmux('kill-server').catch(() => {}));
      const waitFor = (what: RegExp, ms = 60_000) =>
        eventually(async () => what.test(await screen()), ms, `screen showing ${what}`);

      await waitFor(/meter top {2}acme \(pro\)/);
      await waitFor(/ 3 calls /);
      expect(await tmux('display', '-p', '-t', 'top', '#{alternate_on}')).toBe('1\n');
      // NO_COLOR: no colour, bold or dim anywhere on the screen (-e keeps the escape sequences).
      expect(await tmux('capture-pane', '-p', '-e', '-t', 'top')).not.toMatch(
        /\u001B\[(?:[0-9;]*;)?(?:1|2|3[0-8]|9[0-7])(?:;[0-9;]*)?m/,
      );
      for (const line of (await screen()).split('\n')) expect([...line].length).toBeLessThanOrEqual(80);

      await call('team=ads,env=e2e');
      await call('team=ads,env=e2e');
      await waitFor(/ 5 calls /, 30_000); // the month line, and the tail, follow new calls
      expect((await screen()).match(/gpt-4o/g)?.length).toBeGreaterThanOrEqual(5);

      await waitFor(/By tag env, month/);
      await tmux('send-keys', '-t', 'top', 't');
      await waitFor(/By tag team, month/, 10_000);
      await tmux('send-keys', '-t', 'top', 'p');
      await waitFor(/PAUSED/, 10_000);
      await tmux('send-keys', '-t', 'top', 'p');
      await tmux('send-keys', '-t', 'top', '?');
      await waitFor(/q, Ctrl-C {2}quit/, 10_000);
      await tmux('send-keys', '-t', 'top', 'x'); // any key closes the help
      await waitFor(/By tag team, month/, 10_000);

      await tmux('resize-window', '-t', 'top', '-x', '160', '-y', '30');
      await eventually(
        async () => (await screen()).split('\n').some((l) => [...l].length > 100),
        10_000,
        'a frame as wide as the terminal',
      );
      expect((await screen()).match(/meter top {2}acme/g)).toHaveLength(1); // redrawn in place, not appended
      await tmux('resize-window', '-t', 'top', '-x', '100', '-y', '20');
      await eventually(
        async () => {
          const lines = (await screen()).split('\n');
          return (
            lines[0]!.startsWith('meter top') &&
            lines.every((l) => [...l].length <= 100) &&
            /^q quit/.test(lines[18] ?? '')
          );
        },
        10_000,
        'a frame of 19 lines within 100 columns',
      );

      await tmux('send-keys', '-t', 'top', 'q');
      // The shell prints EXIT first and stty's line after it: wait for both, not the first alone.
      await waitFor(/EXIT=0\n-?icanon/, 20_000);
      const after = await screen();
      expect(await tmux('display', '-p', '-t', 'top', '#{alternate_on} #{cursor_flag}')).toBe('0 1\n');
      expect(after).not.toMatch(/meter top|provider|By model/); // nothing of the frames is left
      expect(after).toMatch(/BEFORE\nEXIT=0\nicanon/); // the shell's screen, line mode back
    },
  );
});
