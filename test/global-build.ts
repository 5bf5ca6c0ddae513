import { spawnSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { packageRoot } from '../src/paths.js';
import { METER_BIN } from './helpers/cli.js';

/** What `npm run build` reads: a change to any of them makes dist/ stale. */
const SOURCES = ['src', 'cli', 'bench', 'sql', 'tsconfig.json', 'package.json'];

function newestMtime(path: string): number {
  const stat = statSync(path);
  if (!stat.isDirectory()) return stat.mtimeMs;
  return readdirSync(path).reduce((newest, name) => Math.max(newest, newestMtime(join(path, name))), stat.mtimeMs);
}

/** When the last build ran: tsc rewrites all its output, the `meter` binary too. */
function builtAt(): number {
  try {
    return statSync(join(packageRoot, METER_BIN)).mtimeMs;
  } catch {
    return -1;
  }
}

/**
 * Vitest's global setup: the tests run the built `meter` (dist/), as users do, and as fast as
 * it starts (through tsx every CLI run took twice the CPU). A checkout whose sources changed
 * since the last build is built first, once, so no test runs yesterday's binary.
 */
export default function buildIfStale(): void {
  const newest = Math.max(...SOURCES.map((s) => newestMtime(join(packageRoot, s))));
  if (builtAt() >= newest) return;
  const build = spawnSync('npm', ['run', 'build'], { cwd: packageRoot, stdio: 'inherit' });
  if (build.status !== 0) throw new Error(`npm run build exited ${build.status}: the tests need a built dist/`);
}
