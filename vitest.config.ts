import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.{ts,tsx}'],
    // Tests run the built `meter`: dist/ is built first when the sources are newer.
    globalSetup: ['test/global-build.ts'],
    // Files run in parallel (each gets its own database); 2 cores, mostly I/O-bound tests.
    pool: 'forks',
    maxWorkers: 4,
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
});
