/**
 * `meter start` on the embedded store, from launch to `/readyz` 200: on a new data directory
 * (as a new user runs it) and again on the one it left (an existing store). Runnable alone:
 *
 *   node dist/bench/startup.js [--runs 3]
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { request } from 'undici';
import { packageRoot } from '../src/paths.js';
import { freePort, rssMb } from './processes.js';

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** One start: ms from spawn to the first /readyz 200, and the RSS then. The daemon is stopped after. */
async function timeStart(dataDir: string): Promise<{ ms: number; rss: number }> {
  const port = await freePort();
  const t0 = performance.now();
  const child = spawn(process.execPath, [join(packageRoot, 'dist/cli/main.js'), 'start'], {
    env: {
      ...process.env,
      METER_PORT: String(port),
      METER_HOST: '127.0.0.1',
      METER_DATA_DIR: dataDir,
      DATABASE_URL: '',
      METER_LOG_LEVEL: 'warn',
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  let exited = false;
  child.once('exit', () => (exited = true));
  try {
    for (;;) {
      if (exited) throw new Error(`meter start exited with ${child.exitCode}`);
      try {
        const res = await request(`http://127.0.0.1:${port}/readyz`);
        await res.body.dump();
        if (res.statusCode === 200) return { ms: performance.now() - t0, rss: rssMb(child.pid!) };
      } catch {
        // not listening yet
      }
      await new Promise((r) => setTimeout(r, 5));
    }
  } finally {
    if (!exited) {
      const gone = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await gone;
    }
  }
}

export interface StartupResult {
  fresh: number[];
  existing: number[];
  rss: number[];
}

/** `runs` new data directories, each started twice (new, then existing). */
export async function measureStartup(runs: number, log: (msg: string) => void = () => {}): Promise<StartupResult> {
  const out: StartupResult = { fresh: [], existing: [], rss: [] };
  for (let i = 0; i < runs; i++) {
    const dir = mkdtempSync(join(tmpdir(), 'meter-bench-start-'));
    try {
      const a = await timeStart(dir);
      const b = await timeStart(dir);
      log(
        `start-up ${i + 1}/${runs}: new data dir ${a.ms.toFixed(0)} ms, existing ${b.ms.toFixed(0)} ms (RSS at ready ${b.rss.toFixed(0)} MB)`,
      );
      out.fresh.push(a.ms);
      out.existing.push(b.ms);
      out.rss.push(b.rss);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
  return out;
}

export function startupRows(r: StartupResult): string[] {
  const s = (xs: number[]) =>
    `median ${(median(xs) / 1000).toFixed(2)} s (${xs.map((x) => (x / 1000).toFixed(2)).join(', ')})`;
  return [
    `meter start → /readyz 200, embedded store, new data dir:      ${s(r.fresh)}   target ≤ 3 s`,
    `meter start → /readyz 200, embedded store, existing data dir: ${s(r.existing)}   target ≤ 1.5 s`,
  ];
}

if (import.meta.url === pathToFileURL(process.argv[1]!).href) {
  const i = process.argv.indexOf('--runs');
  const r = await measureStartup(i >= 0 ? Number(process.argv[i + 1]) : 3, (m) => process.stderr.write(m + '\n'));
  process.stdout.write(startupRows(r).join('\n') + '\n');
}
