import { connect } from 'node:net';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { startDaemon } from '../../src/server/daemon.js';
import { tempDir } from '../helpers/stores.js';

describe('daemon shutdown', () => {
  it('drains a call in flight, and does not wait for idle or silent connections', async () => {
    const config = loadConfig({ METER_PORT: '0', METER_DATA_DIR: tempDir() });
    let release!: () => void;
    const daemon = await startDaemon(config, pino({ level: 'silent' }), [
      () => ({
        name: 'slow',
        routes: {
          '/slow': (_req, res) => {
            new Promise<void>((r) => (release = r)).then(() => res.end('done'));
          },
        },
      }),
    ]);
    const { port } = new URL(daemon.url);
    // A connection that never sends a request, and a keep-alive one that went idle.
    const silent = connect(Number(port), '127.0.0.1');
    await new Promise((r) => silent.once('connect', r));
    expect((await fetch(`${daemon.url}/healthz`)).status).toBe(200);
    const inFlight = fetch(`${daemon.url}/slow`).then((r) => r.text());
    await new Promise((r) => setTimeout(r, 100));

    const t0 = Date.now();
    const closed = daemon.close();
    setTimeout(() => release(), 300);
    expect(await inFlight).toBe('done');
    await closed;
    expect(Date.now() - t0).toBeLessThan(3_000);
    expect(silent.destroyed || silent.readableEnded).toBe(true);
  });
});
