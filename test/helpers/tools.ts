import { spawnSync } from 'node:child_process';

/**
 * A test that needs a program outside npm (promtool, tmux). On a developer's machine without
 * it, the test is skipped with one line saying what to install; under CI (`CI` set, as .ci/run
 * installs both) a missing program fails the file loudly instead of skipping quietly.
 */
export function hasTool(command: string, install: string): boolean {
  const found = spawnSync('sh', ['-c', `command -v ${command}`], { stdio: 'ignore' }).status === 0;
  if (found) return true;
  const ci = process.env.CI !== undefined && process.env.CI !== '' && process.env.CI !== 'false';
  if (ci) throw new Error(`${command} is not installed, and CI is set: install it (${install})`);
  console.warn(`skipped: tests that need ${command}; install it to run them (${install})`);
  return false;
}

export const PROMTOOL_INSTALL = 'apt-get install prometheus, or promtool from prometheus.io/download';
