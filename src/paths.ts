import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The package root, found from this file both in src/ (development) and dist/src/ (built). */
function findRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'package.json'))) {
    const up = dirname(dir);
    if (up === dir) throw new Error('meter: package.json not found above ' + dirname(fileURLToPath(import.meta.url)));
    dir = up;
  }
  return dir;
}

export const packageRoot = findRoot();
export const sqlDir = join(packageRoot, 'sql');
