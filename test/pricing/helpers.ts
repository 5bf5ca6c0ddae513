import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Usage } from '../../src/providers/types.js';

/** Normalised usage: `input` is ALL prompt tokens (uncached + cache reads + cache writes). */
export function usage(u: Partial<Usage> & { inputTokens: number; outputTokens: number }): Usage {
  return { cachedInputTokens: 0, cacheWriteTokens: 0, cacheWrite1hTokens: 0, reasoningTokens: 0, ...u };
}

let dir: string | undefined;
/** Writes a file in a fresh temporary directory and returns its path. */
export function tempFile(name: string, content: string): string {
  dir ??= mkdtempSync(join(tmpdir(), 'meter-pricing-'));
  const path = join(dir, name);
  writeFileSync(path, content);
  return path;
}

export const T = (iso: string): Date => new Date(iso);
