import { afterEach, expect, it, vi } from 'vitest';
import { hasTool } from './helpers/tools.js';

/** A fresh machine's `npm test`: a test needing a missing program is skipped with one line that
 *  says what to install; under CI the same is a loud failure (.ci/run installs them). */
const saved = process.env.CI;
afterEach(() => {
  if (saved === undefined) delete process.env.CI;
  else process.env.CI = saved;
  vi.restoreAllMocks();
});

it('finds an installed program', () => {
  expect(hasTool('sh', 'it is everywhere')).toBe(true);
});

it('without CI: false, and one line naming what to install', () => {
  delete process.env.CI;
  const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
  expect(hasTool('meter-no-such-tool', 'apt-get install nothing')).toBe(false);
  expect(warn.mock.calls).toEqual([
    ['skipped: tests that need meter-no-such-tool; install it to run them (apt-get install nothing)'],
  ]);
});

it('under CI: a loud failure', () => {
  process.env.CI = 'true';
  expect(() => hasTool('meter-no-such-tool', 'apt-get install nothing')).toThrow(
    'meter-no-such-tool is not installed, and CI is set: install it (apt-get install nothing)',
  );
});
