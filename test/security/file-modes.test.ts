import { spawn } from 'node:child_process';
import { chmodSync, chownSync, lstatSync, mkdirSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { packageRoot } from '../../src/paths.js';
import { lineOf } from '../../src/store/event-run.js';
import { Spool } from '../../src/store/spool.js';
import { spawnDaemon, type RunningDaemon } from '../helpers/daemon.js';
import { answerChat } from '../helpers/fleet.js';
import { tempDir } from '../helpers/stores.js';
import { startFakeUpstream } from '../helpers/upstreams.js';

/**
 * Everything meter writes is 0600 (files) / 0700 (directories), whatever the umask and whoever
 * made the directory: the embedded store's files (PGlite's own included), the lock file, spool
 * segments, dead-letter.jsonl and saved price data. A data directory made beforehand 0755 (as a
 * Docker image's /data is) is tightened; one that another user owns is refused, clearly.
 */

/** Every path under `dir` (itself included) whose mode lets anyone else in. */
function openToOthers(dir: string): string[] {
  const out: string[] = [];
  const walk = (p: string) => {
    const st = lstatSync(p);
    if (st.isSymbolicLink()) return;
    if ((st.mode & 0o077) !== 0) out.push(`${p} ${(st.mode & 0o777).toString(8)}`);
    if (st.isDirectory()) for (const name of readdirSync(p)) walk(join(p, name));
  };
  walk(dir);
  return out;
}

const count = (dir: string): number =>
  readdirSync(dir, { withFileTypes: true }).reduce((n, e) => n + (e.isDirectory() ? count(join(dir, e.name)) : 1), 0);

/** `meter <args>` from the source under umask 000, as a careless operator's shell runs it. */
function meterUmask000(args: string[], env: NodeJS.ProcessEnv) {
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    const child = spawn('sh', ['-c', 'umask 000; exec "$0" --import tsx cli/main.ts "$@"', process.execPath, ...args], {
      cwd: packageRoot,
      env: { ...process.env, METER_LOG_LEVEL: 'silent', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

let daemon: RunningDaemon | undefined;
afterAll(async () => {
  await daemon?.stop('SIGKILL');
});

describe('file modes', () => {
  it(
    'umask 000 and a data directory made 0755 beforehand: the directory is tightened; the embedded store, lock and spool are private',
    { timeout: 180_000 },
    async () => {
      const dataDir = join(tempDir(), 'data');
      mkdirSync(dataDir);
      chmodSync(dataDir, 0o755);
      const upstream = await startFakeUpstream();
      answerChat(upstream, { prompt: 10, completion: 5 });
      const env = {
        METER_DATA_DIR: dataDir,
        DATABASE_URL: '',
        METER_PORT: '0',
        METER_UPSTREAM_OPENAI: `${upstream.origin}/v1`,
      };
      const created = await meterUmask000(['accounts', 'create', 'modes', '--plan', 'pro'], env);
      expect(created.code, created.stderr).toBe(0);
      const key = JSON.parse((await meterUmask000(['keys', 'create', '--account', 'modes', '--json'], env)).stdout).key;
      daemon = await spawnDaemon(
        'sh',
        ['-c', 'umask 000; exec "$0" --import tsx cli/main.ts start', process.execPath],
        { ...env, METER_LOG_LEVEL: 'warn' },
      );
      for (let i = 0; i < 3; i++) {
        const res = await fetch(`${daemon.url}/proxy/openai/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          body: '{"model":"gpt-4o","messages":[]}',
        });
        expect(res.status).toBe(200);
        await res.text();
      }
      // While it runs: lock file, spool, the store's files.
      expect(readdirSync(dataDir)).toEqual(expect.arrayContaining(['pgdata', 'spool']));
      expect(openToOthers(dataDir)).toEqual([]);
      expect(await daemon.stop('SIGTERM')).toBe(0);
      daemon = undefined;
      expect(count(dataDir)).toBeGreaterThan(20);
      expect(openToOthers(dataDir)).toEqual([]);
      expect(statSync(dataDir).mode & 0o777).toBe(0o700);
    },
  );

  it('spool segments and dead-letter.jsonl are 0600 under umask 000', async () => {
    const dir = join(tempDir(), 'spool');
    const before = process.umask(0);
    try {
      const spool = new Spool<{ n: number }>({ dir });
      spool.open();
      spool.push({ n: 1 });
      spool.push({ n: 2 });
      await spool.flush();
      const segment = readdirSync(dir).find((f) => f.startsWith('seg-'))!;
      expect(statSync(join(dir, segment)).mode & 0o777).toBe(0o600);
      const batch = (await spool.read(10))!;
      await spool.deadLetter([lineOf(batch, 0)], '22003: numeric field overflow');
      await spool.ack(batch);
      await spool.close();
      expect(statSync(spool.deadLetterPath).mode & 0o777).toBe(0o600);
      expect(openToOthers(dir)).toEqual([]);
    } finally {
      process.umask(before);
    }
  });

  it.runIf(process.getuid?.() === 0)(
    'a data directory open to others and owned by another user is refused with a message naming METER_DATA_DIR',
    async () => {
      const dataDir = join(tempDir(), 'theirs');
      mkdirSync(dataDir);
      chmodSync(dataDir, 0o755);
      chownSync(dataDir, 65534, 65534);
      const r = await meterUmask000(['accounts', 'list'], { METER_DATA_DIR: dataDir, DATABASE_URL: '' });
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/^meter: METER_DATA_DIR .*theirs is open to other users \(mode 0755\).*chmod 700/);
      expect(r.stderr.trim().split('\n')).toHaveLength(1);
      expect(statSync(dataDir).mode & 0o777).toBe(0o755);
    },
  );
});
