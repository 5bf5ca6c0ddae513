import { accessSync, constants, existsSync, mkdirSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import { MeterError } from '../errors.js';

/** The data directory (--data-dir / METER_DATA_DIR) cannot be used: the message says why and
 *  names the setting; `exitCode` 2 when the value itself is wrong (a file is in the way), else 1. */
export class DataDirError extends MeterError {
  override name = 'DataDirError';
  constructor(
    message: string,
    override readonly exitCode: 1 | 2,
  ) {
    super(message);
  }
}

/**
 * mkdir -p that never loops: Node's own recursive mkdir spins forever, deaf to signals, where
 * the parent exists but refuses a new entry with ENOENT (`/proc/x`). Throws the system's error.
 */
export function makeDirectory(dir: string, mode = 0o700): void {
  try {
    mkdirSync(dir, { mode });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EEXIST') {
      if (statSync(dir).isDirectory()) return;
      throw Object.assign(new Error(`${dir} is not a directory`), { code: 'ENOTDIR' });
    }
    const parent = dirname(dir);
    if (code !== 'ENOENT' || parent === dir || existsSync(parent)) throw err;
    makeDirectory(parent, mode);
    mkdirSync(dir, { mode });
  }
}

/** Creates the data directory if needed and checks this user may write in it. `setting` is
 *  what the user set it with (`--data-dir`, `METER_DATA_DIR`, or the default). */
export function prepareDataDir(dir: string, setting = '--data-dir or METER_DATA_DIR'): void {
  try {
    makeDirectory(dir);
    accessSync(dir, constants.W_OK | constants.X_OK);
  } catch (err) {
    throw dataDirError(dir, setting, err);
  }
}

const REASONS: Record<string, string> = {
  EACCES: 'permission denied for this user',
  EPERM: 'permission denied for this user',
  EROFS: 'the file system is read-only',
  ENOENT: 'its parent does not accept new directories',
  ENOSPC: 'the disk is full',
};

export function dataDirError(dir: string, setting: string, err: unknown): DataDirError {
  const code = (err as NodeJS.ErrnoException).code;
  const where = `the data directory ${JSON.stringify(dir)} (${setting})`;
  const fix = 'choose another with --data-dir or METER_DATA_DIR';
  if (code === 'ENOTDIR') return new DataDirError(`${where} is not a directory: a file is in the way; ${fix}`, 2);
  const why = REASONS[code ?? ''] ?? code ?? (err as Error).message;
  return new DataDirError(`cannot create or write in ${where}: ${why}; ${fix}`, 1);
}
