import { beforeAll, describe, expect, it } from 'vitest';
import { createAccount } from '../../src/auth/accounts.js';
import { createKey } from '../../src/auth/keys.js';
import type { Daemon } from '../../src/server/daemon.js';
import { runCli } from '../helpers/cli.js';
import { eventually, startFullDaemon } from '../helpers/fleet.js';
import { createTestDatabase } from '../helpers/stores.js';
import { startFakeUpstream, type FakeUpstream } from '../helpers/upstreams.js';

/**
 * A key holder writes to the operator's terminal only through meter: tag values (percent-
 * decoded, so any byte) and a model name in a body the provider rejects reach `meter top` and
 * the CLI's tables. Control characters (ESC, BEL, CR, LF, C1 CSI, bidi overrides) must arrive
 * as visible escapes, never raw: a raw ESC could clear the screen, a CR or LF forge a line.
 */

let daemon: Daemon;
let upstream: FakeUpstream;
let databaseUrl: string;
let key: string;

/** Every character that makes a terminal do something other than print; \n ends lines. */
const CONTROL = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/;
const HOSTILE = 'x\u001b[2J\u0007\r\nFORGED \u009b31m\u202e';

beforeAll(async () => {
  upstream = await startFakeUpstream();
  upstream.respond((_req, res) => {
    res.writeHead(400, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ error: { message: 'bad model', type: 'invalid_request_error', code: null } }));
  });
  databaseUrl = await createTestDatabase();
  daemon = await startFullDaemon(databaseUrl, upstream);
  await createAccount(daemon.store, 'tty', 'pro');
  key = (await createKey(daemon.store, 'tty', `label${HOSTILE}`)).key;
  const res = await fetch(`${daemon.url}/proxy/openai/v1/chat/completions`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${key}`,
      'content-type': 'application/json',
      'x-metering-tags': `team=${encodeURIComponent(HOSTILE)}`,
    },
    body: JSON.stringify({ model: `gpt${HOSTILE}`, messages: [] }),
  });
  expect(res.status).toBe(400);
  await res.text();
}, 120_000);

describe('caller strings are made printable before they reach a terminal', () => {
  it('meter top --once: the tail, the model and tag tables', { timeout: 120_000 }, async () => {
    let text = '';
    await eventually(
      async () => {
        const out = await runCli(['top', '--once', '--account', 'tty'], { DATABASE_URL: databaseUrl });
        expect(out.code, out.stderr).toBe(0);
        text = out.stdout;
        return text.includes('gptx');
      },
      60_000,
      'the hostile call in meter top',
    );
    expect(text).toContain('\\x1b[2J');
    expect(text).not.toMatch(CONTROL);
    // The JSON figures keep the exact strings (JSON escapes them).
    const json = await runCli(['top', '--once', '--json', '--account', 'tty'], { DATABASE_URL: databaseUrl });
    expect(JSON.parse(json.stdout).tail[0].tags.team).toBe(HOSTILE);
  });

  it('meter keys list: a table cell', async () => {
    const out = await runCli(['keys', 'list', '--account', 'tty'], { DATABASE_URL: databaseUrl });
    expect(out.code, out.stderr).toBe(0);
    expect(out.stdout).toContain('label');
    expect(out.stdout).toContain('\\x07');
    expect(out.stdout).not.toMatch(CONTROL);
  });
});
