import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** Two processes on one PGlite directory silently lose data, so the embedded store is
 *  guarded by a lock file holding the owner's pid (and, for a daemon, where its admin API is). */
export interface LockInfo {
  pid: number;
  /** Set by a running daemon so CLI commands can go through it instead of the locked store:
   *  its admin socket (or, when the socket path is too long, a 127.0.0.1 URL) and token. */
  adminSocket?: string;
  adminUrl?: string;
  adminToken?: string;
}

export class StoreLockedError extends Error {
  override name = 'StoreLockedError';
  constructor(readonly dataDir: string, readonly owner: LockInfo) {
    super(`the embedded store in ${dataDir} is in use by process ${owner.pid} (a running meter daemon?); ` +
      'stop it, or set METER_DATA_DIR to another directory, or DATABASE_URL to share PostgreSQL');
  }
}

export const lockPath = (dataDir: string) => join(dataDir, 'meter.lock');

export function readLock(dataDir: string): LockInfo | undefined {
  try {
    const info = JSON.parse(readFileSync(lockPath(dataDir), 'utf8')) as LockInfo;
    return Number.isInteger(info.pid) ? info : undefined;
  } catch {
    return undefined;
  }
}

/** true while process `pid` exists (EPERM: it exists, as another user's). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Takes the lock or throws StoreLockedError; a stale lock from a dead process is taken over. */
export function acquireLock(dataDir: string): { update(info: Partial<LockInfo>): void; release(): void } {
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const path = lockPath(dataDir);
  let info: LockInfo = { pid: process.pid };
  for (let attempt = 0; ; attempt++) {
    try {
      writeFileSync(path, JSON.stringify(info), { flag: 'wx', mode: 0o600 });
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST' || attempt > 3) throw err;
      const owner = readLock(dataDir);
      if (owner && owner.pid !== process.pid && alive(owner.pid)) throw new StoreLockedError(dataDir, owner);
      // Stale (or unreadable) lock: move it aside atomically so two takers cannot both win.
      const aside = `${path}.${randomBytes(4).toString('hex')}`;
      try {
        renameSync(path, aside);
        rmSync(aside, { force: true });
      } catch {
        /* another process took it over first; loop and look again */
      }
    }
  }
  const write = () => {
    const tmp = `${path}.${process.pid}.tmp`;
    writeFileSync(tmp, JSON.stringify(info), { mode: 0o600 });
    renameSync(tmp, path);
  };
  return {
    update(more) {
      info = { ...info, ...more };
      write();
    },
    release() {
      if (readLock(dataDir)?.pid === process.pid) rmSync(path, { force: true });
    },
  };
}
