import { MeterFailure } from '../errors.js';
import { randomBytes } from 'node:crypto';
import { linkSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { privateDir } from './private-files.js';

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

/** Where CLI commands reach the admin API: written to the 0600 lock file with the token. */
export interface AdminAddress {
  /** The Unix socket `meter.sock` in METER_DATA_DIR (mode 0600). */
  socket?: string;
  /** Only when the socket path is too long for the OS: http://127.0.0.1:<random port>. */
  url?: string;
  token: string;
}

export class StoreLockedError extends MeterFailure {
  override name = 'StoreLockedError';
  constructor(
    readonly dataDir: string,
    readonly owner: LockInfo,
  ) {
    super(
      `the embedded store in ${dataDir} is in use by process ${owner.pid} (a running meter daemon?); ` +
        'stop it, or set METER_DATA_DIR to another directory, or DATABASE_URL to share PostgreSQL',
    );
  }
}

export const lockPath = (dataDir: string) => join(dataDir, 'meter.lock');

export const readLock = (dataDir: string): LockInfo | undefined => readLockFile(lockPath(dataDir));

function readLockFile(path: string): LockInfo | undefined {
  try {
    const info = JSON.parse(readFileSync(path, 'utf8')) as LockInfo;
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

/** A live process other than this one: a lock it holds is not stale. */
const heldByOther = (owner: LockInfo | undefined): owner is LockInfo =>
  !!owner && owner.pid !== process.pid && alive(owner.pid);

/** Creates the lock file with its content in one step, or returns false if it exists. A file
 *  created empty and written after ('wx') would show another taker an unreadable lock in
 *  between, which it takes for stale: two processes would hold the store. */
function create(path: string, info: LockInfo): boolean {
  const tmp = `${path}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  writeFileSync(tmp, JSON.stringify(info), { mode: 0o600 });
  try {
    linkSync(tmp, path);
    return true;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EEXIST') return false;
    if (code !== 'EPERM' && code !== 'ENOTSUP' && code !== 'ENOSYS') throw err;
    // A file system without hard links: exclusive create, with the window above.
    return createExclusive(path, info);
  } finally {
    rmSync(tmp, { force: true });
  }
}

function createExclusive(path: string, info: LockInfo): boolean {
  try {
    writeFileSync(path, JSON.stringify(info), { flag: 'wx', mode: 0o600 });
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw err;
  }
}

/** Takes the lock or throws StoreLockedError; a stale lock from a dead process is taken over. */
export function acquireLock(dataDir: string): { update(info: Partial<LockInfo>): void; release(): void } {
  privateDir(dataDir);
  const path = lockPath(dataDir);
  let info: LockInfo = { pid: process.pid };
  for (let attempt = 0; !create(path, info); attempt++) {
    const owner = readLockFile(path);
    if (heldByOther(owner)) throw new StoreLockedError(dataDir, owner);
    if (attempt > 3) throw new Error(`could not take the lock file ${path}: it keeps coming back`);
    // Stale (or unreadable) lock: move it aside atomically so two takers cannot both win. A
    // faster taker may have replaced it in between: what moved is then live, and goes back.
    const aside = `${path}.${randomBytes(4).toString('hex')}`;
    try {
      renameSync(path, aside);
    } catch {
      continue; // another process moved it first; look again
    }
    const moved = readLockFile(aside);
    if (heldByOther(moved)) {
      try {
        linkSync(aside, path);
      } catch {
        /* a third taker is in already */
      }
      rmSync(aside, { force: true });
      throw new StoreLockedError(dataDir, moved);
    }
    rmSync(aside, { force: true });
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
