import { spawn } from 'node:child_process';
import { chmodSync, existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { packageRoot } from '../src/paths.js';
import { createTestDatabase, tempDir } from './helpers/stores.js';
import { METER_BIN } from './helpers/cli.js';

/**
 * The docs' promise that their examples run as written: every `meter …` line of a ```sh block of
 * README and of every docs/ page is run in order (README, then the pages in the order README's
 * index lists them, then any other page), as a user would paste it, against one scratch
 * database. Syntax summaries live in ```text blocks and are not run. The few lines that cannot
 * run here are listed with the reason.
 */

const NOT_RUN: [RegExp, string][] = [
  [
    /^meter alerts test\b/,
    'sends to the public Slack/Teams addresses of the examples (no network here; tested in test/cli/alerts.test.ts)',
  ],
  [
    /^meter pricing update(?! --reset)/,
    'fetches the published price file or reads a file of yours (no network here; tested against a loopback server in test/pricing)',
  ],
];

function shellExamples(readme: string): string[] {
  const lines: string[] = [];
  for (const block of readme.matchAll(/^```sh\n([\s\S]*?)^```/gm)) {
    for (const raw of block[1]!.split('\n')) {
      const line = raw.replace(/\s+#\s.*$/, '').trim();
      if (line.startsWith('meter ')) lines.push(line);
    }
  }
  return lines;
}

function sh(line: string, env: NodeJS.ProcessEnv): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn('sh', ['-c', line], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

/** README first, then docs/ pages as README's index links them, then the rest by name. */
function pagesInOrder(): string[] {
  const readme = readFileSync(join(packageRoot, 'README.md'), 'utf8');
  const linked = [...readme.matchAll(/\]\((docs\/[\w.-]+\.md)\)/g)].map((m) => m[1]!);
  const all = existsSync(join(packageRoot, 'docs'))
    ? readdirSync(join(packageRoot, 'docs'))
        .filter((f) => f.endsWith('.md'))
        .map((f) => `docs/${f}`)
        .sort()
    : [];
  return ['README.md', ...new Set([...linked.filter((p) => all.includes(p)), ...all])];
}

describe('README and docs/ examples', () => {
  const examples = pagesInOrder().flatMap((p) => shellExamples(readFileSync(join(packageRoot, p), 'utf8')));

  it('has CLI examples, written with real values (no <placeholders> or …)', () => {
    expect(examples.length).toBeGreaterThan(10);
    for (const line of examples) expect(line, line).not.toMatch(/<[a-z-]+>|…|\[--/);
    // Every exclusion still names a line README has: the list cannot rot.
    for (const [pattern, why] of NOT_RUN)
      expect(
        examples.some((l) => pattern.test(l)),
        why,
      ).toBe(true);
  });

  it(
    'every `meter` line of a sh block runs as written, in order, against a scratch store',
    { timeout: 300_000 },
    async () => {
      const bin = tempDir();
      writeFileSync(
        join(bin, 'meter'),
        `#!/bin/sh\nexec "${process.execPath}" "${join(packageRoot, METER_BIN)}" "$@"\n`,
      );
      chmodSync(join(bin, 'meter'), 0o755);
      const env = {
        PATH: `${bin}:${process.env.PATH}`,
        DATABASE_URL: await createTestDatabase(),
        METER_DATA_DIR: tempDir(),
        METER_SMTP_URL: 'smtp://127.0.0.1:1',
        METER_LOG_LEVEL: 'silent',
      };
      const failures: string[] = [];
      for (const line of examples) {
        if (NOT_RUN.some(([pattern]) => pattern.test(line))) continue;
        const r = await sh(line, env);
        if (r.code !== 0) failures.push(`${line}\n  exit ${r.code}: ${r.stderr.trim()}`);
      }
      expect(failures).toEqual([]);
    },
  );
});
