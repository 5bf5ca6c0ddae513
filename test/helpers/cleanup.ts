import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll } from 'vitest';

const tasks: (() => unknown)[] = [];

/**
 * Releases something at the end of the test file, wherever it was made: an `afterAll`
 * registered inside a `beforeAll` never runs (vitest 4), so helpers called from hooks use this.
 * Newest first, like afterAll hooks.
 */
export function atFileEnd(task: () => unknown): void {
  tasks.push(task);
}

afterAll(async () => {
  for (const task of tasks.splice(0).reverse()) {
    try {
      await task();
    } catch {
      // one failed cleanup must not skip the others
    }
  }
});

/** Removes a directory at the end of the file. */
export function removeAtFileEnd(dir: string): void {
  atFileEnd(() => rmSync(dir, { recursive: true, force: true }));
}

/** Drops a test database (made by createTestDatabase) at the end of the file. */
export function dropAtFileEnd(databaseUrl: string): void {
  atFileEnd(async () => {
    const url = new URL(databaseUrl);
    const name = url.pathname.slice(1);
    if (!/^meter_t_[0-9a-f]+$/.test(name)) return;
    url.pathname = '/postgres';
    const c = new pg.Client({ connectionString: url.toString() });
    await c.connect();
    try {
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    } finally {
      await c.end();
    }
  });
}

/** A fresh temporary directory, removed at the end of the file (callable from hooks). */
export function tempDirAtFileEnd(prefix = 'meter-test-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  removeAtFileEnd(dir);
  return dir;
}
