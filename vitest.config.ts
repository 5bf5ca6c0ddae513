import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.{ts,tsx}'],
    // Tests run the built `meter`: dist/ is built first when the sources are newer.
    globalSetup: ['test/global-build.ts'],
    // Files run in parallel (each gets its own database); 2 cores, mostly I/O-bound tests.
    pool: 'forks',
    maxWorkers: 4,
    // Room for CI machines measured at 2.3 times this one's test time (a daemon's start in a
    // hook once took over 60 s there); a test that hangs still fails.
    testTimeout: 60_000,
    hookTimeout: 120_000,
  },
});
