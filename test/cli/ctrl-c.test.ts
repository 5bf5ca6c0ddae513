/**
 * Ctrl-C under `npm start`, in a real pseudo-terminal (tmux): the terminal sends SIGINT to the
 * whole foreground group and npm forwards its own copy, so the daemon receives the signal twice
 * within a moment. That is one request to stop: the daemon drains the call in flight and exits 0.
 * A deliberate second Ctrl-C later cuts the drain (exit 1).
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { REPEATED_SIGNAL_MS } from '../../cli/commands/start.js';
import { packageRoot } from '../../src/paths.js';
import { atFileEnd } from '../helpers/cleanup.js';
import { runCli } from '../helpers/cli.js';
import { eventually } from '../helpers/fleet.js';
import { createTestDatabase, postgresUrl } from '../helpers/stores.js';
import { hasTool } from '../helpers/tools.js';
import { startFakeUpstream, type FakeUpstream } from '../helpers/upstreams.js';

const hasTmux = hasTool('tmux', 'apt-get install tmux');

const run = promisify(execFile);
const socket = `meter-ctrl-c-${randomBytes(4).toString('hex')}`;
const tmux = async (...args: string[]) => (await run('tmux', ['-L', socket, ...args])).stdout;
const shellQuote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.skipIf(!hasTmux || !postgresUrl)('Ctrl-C under npm start, in a terminal', () => {
  let upstream: FakeUpstream;
  let env: Record<string, string>;
  let key: string;
  /** Ends the call the fake provider is holding. */
  let release: () => void = () => {};

  beforeAll(async () => {
    upstream = await startFakeUpstream();
    // The provider answers headers and a first chunk at once, the rest when the test says.
    upstream.respond(async (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"id":"chatcmpl-1","object":"chat.completion","model":"gpt-4o-mini",');
      await new Promise<void>((r) => (release = r));
      res.end('"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}');
    });
    atFileEnd(() => upstream.close());
    env = {
      DATABASE_URL: await createTestDatabase(),
      METER_PORT: '0',
      METER_UPSTREAM_OPENAI: `${upstream.origin}/v1`,
      METER_LOG_LEVEL: 'info',
    };
    expect((await runCli(['accounts', 'create', 'acme'], env)).code).toBe(0);
    const created = await runCli(['keys', 'create', '--account', 'acme', '--json'], env);
    key = (JSON.parse(created.stdout) as { key: string }).key;
    atFileEnd(() => tmux('kill-server').catch(() => {}));
  }, 120_000);

  /** `npm start` in a new terminal, a call held by the provider, then Ctrl-C: resolves once the
   *  drain has begun and the moment in which a repeated signal is the same request is over. */
  async function ctrlCDuringCall(session: string) {
    const vars = Object.entries(env)
      .map(([k, v]) => `${k}=${shellQuote(v)}`)
      .join(' ');
    const command = `env ${vars} npm start; echo EXIT=$?; sleep 300`;
    await tmux('new-session', '-d', '-s', session, '-x', '200', '-y', '50', '-c', packageRoot, command);
    const screen = () => tmux('capture-pane', '-p', '-J', '-t', session);
    let url = '';
    await eventually(
      async () => {
        url = /meter listening on (http:\/\/\S+)/.exec(await screen())?.[1] ?? '';
        return url !== '';
      },
      60_000,
      'meter listening on the screen',
    );
    const requestsBefore = upstream.requests.length;
    const answered = fetch(`${url}/proxy/openai/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: '{"model":"gpt-4o-mini","messages":[]}',
    }).then(
      async (res) => ({ status: res.status, body: await res.text().catch((err: Error) => `cut: ${err.message}`) }),
      (err: Error) => ({ status: 0, body: `cut: ${err.message}` }),
    );
    await eventually(async () => upstream.requests.length > requestsBefore, 10_000, 'the call at the provider');
    const ctrlC = () => tmux('send-keys', '-t', session, 'C-c');
    await ctrlC();
    await eventually(async () => /draining in-flight calls/.test(await screen()), 10_000, 'the drain begins');
    await sleep(REPEATED_SIGNAL_MS + 500);
    return { screen, answered, ctrlC };
  }

  it('one Ctrl-C (npm forwards it again) drains the call in flight and exits 0', { timeout: 120_000 }, async () => {
    const { screen, answered } = await ctrlCDuringCall('once');
    expect(await screen()).not.toMatch(/EXIT=|second signal:/); // still draining
    release();
    const { status, body } = await answered;
    expect(status).toBe(200);
    expect(body).toContain('"total_tokens":5}}'); // the whole response, not cut
    await eventually(async () => /EXIT=\d/.test(await screen()), 30_000, 'npm start exits');
    const text = await screen();
    expect(text).toMatch(/meter stopped/);
    expect(text).not.toMatch(/second signal:/);
    expect(text).toMatch(/EXIT=0/);
  });

  it('a deliberate second Ctrl-C later cuts the drain and exits 1', { timeout: 120_000 }, async () => {
    const { screen, answered, ctrlC } = await ctrlCDuringCall('twice');
    await ctrlC();
    await eventually(async () => /EXIT=\d/.test(await screen()), 10_000, 'npm start exits');
    const text = await screen();
    expect(text).toMatch(/second signal: exiting without finishing the drain/);
    expect(text).toMatch(/EXIT=1/);
    expect((await answered).body).not.toContain('"total_tokens":5}}');
    release();
  });
});
