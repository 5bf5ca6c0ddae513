import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { packageRoot } from '../src/paths.js';

/** `npm start` on a terminal: one readable line per log entry; in a pipe or a container: pino JSON. */
function logOnce(terminal: boolean): string {
  const code = `const { createLogger } = await import('./src/log.ts');
    createLogger('info', ${terminal}).info({ url: 'http://127.0.0.1:8787' }, 'meter started');`;
  const r = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', code], {
    cwd: packageRoot,
    env: { ...process.env, NO_COLOR: '1' },
    encoding: 'utf8',
  });
  expect(r.status, r.stderr).toBe(0);
  expect(r.stdout).toBe('');
  return r.stderr;
}

describe('log format', () => {
  it('is pino JSON when stderr is not a terminal', () => {
    const line = JSON.parse(logOnce(false)) as Record<string, unknown>;
    expect(line).toMatchObject({ level: 30, msg: 'meter started', url: 'http://127.0.0.1:8787' });
  });

  it('is one human line per entry (then its fields) on a terminal', () => {
    const text = logOnce(true);
    expect(text).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: meter started\n\s+url: "http:\/\/127\.0\.0\.1:8787"\n$/);
    expect(text).not.toContain('{"level"');
  });
});
