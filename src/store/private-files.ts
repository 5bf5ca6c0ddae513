import { MeterFailure } from '../errors.js';
import { chmodSync, lstatSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { prepareDataDir } from './data-dir.js';

/**
 * Everything meter writes is its own: directories 0700, files 0600, whatever the umask and
 * whoever made the directory. The umask is set once for the process (0077), which also covers
 * the files PGlite creates in its worker; meter's own files are opened with explicit modes;
 * a data directory that already exists open to others is tightened when this user owns it and
 * refused otherwise.
 */

/** Mode bits that let other users read or enter. */
const OPEN_TO_OTHERS = 0o077;

/** Thrown when a directory is open to other users and cannot be made private. */
export class OpenDirectoryError extends MeterFailure {
  override name = 'OpenDirectoryError';
}

/** New files and directories of this process: 0600 / 0700 (a worker thread cannot set it; the
 *  main thread's mask applies to it). */
export function restrictUmask(): void {
  try {
    process.umask(0o077);
  } catch {
    // a worker thread: explicit modes still apply
  }
}

const mode = (m: number) => (m & 0o777).toString(8).padStart(4, '0');

/**
 * Creates `dir` (0700) or makes an existing one private, then tightens every file and
 * directory under it that is open to others (files left by an older version, or written under
 * a loose umask). `what` names the setting in an error: `METER_DATA_DIR`.
 */
export function privateDir(dir: string, what = 'METER_DATA_DIR'): void {
  restrictUmask();
  prepareDataDir(dir, what); // never Node's recursive mkdir: it spins on /proc/x
  const st = lstatSync(dir);
  if ((st.mode & OPEN_TO_OTHERS) !== 0) {
    const mine = typeof process.getuid !== 'function' || st.uid === process.getuid();
    try {
      if (!mine) throw new Error('owned by another user');
      chmodSync(dir, 0o700);
    } catch (err) {
      throw new OpenDirectoryError(
        `${what} ${dir} is open to other users (mode ${mode(st.mode)}) and meter cannot make it private (${(err as Error).message}): run \`chmod 700 ${dir}\` as its owner, or choose a directory of your own`,
      );
    }
  }
  tightenTree(dir);
}

/** chmod 0600 / 0700 of whatever under `dir` is open to others (symbolic links are left alone). */
function tightenTree(dir: string): void {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isSymbolicLink()) continue;
    try {
      const st = lstatSync(path);
      if ((st.mode & OPEN_TO_OTHERS) !== 0) chmodSync(path, entry.isDirectory() ? 0o700 : 0o600);
      if (entry.isDirectory()) tightenTree(path);
    } catch {
      // gone meanwhile, or not ours: the directory above is private anyway
    }
  }
}
