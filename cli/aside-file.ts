/**
 * A file that appears whole or not at all: written aside under a random name beside its target,
 * then renamed onto it. The aside file is created exclusively (O_EXCL) and never through a
 * symbolic link (O_NOFOLLOW): a link planted where it would be written is refused, not followed,
 * and its name cannot be guessed in advance.
 */
import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { open, rename, rm, type FileHandle } from 'node:fs/promises';
import { dirname } from 'node:path';
import { CliError } from './context.js';

const EXCLUSIVE = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;

export interface AsideFile {
  path: string;
  handle: FileHandle;
  /** Closes it and renames it onto the target. */
  commit(): Promise<void>;
  /** Closes and removes it (a failed write). */
  discard(): Promise<void>;
}

/** Why a file cannot be made at `target`, in one line naming the flag it came from. */
function cannotWrite(flag: string, target: string, err: NodeJS.ErrnoException): CliError {
  const why =
    err.code === 'ENOENT'
      ? `the directory ${dirname(target)} does not exist`
      : err.code === 'ENOTDIR'
        ? `${dirname(target)} is not a directory`
        : err.code === 'EACCES' || err.code === 'EPERM'
          ? `no permission to write in ${dirname(target)}`
          : (err.code ?? err.message);
  return new CliError(`${flag} ${target}: cannot write there: ${why}`);
}

export async function openAside(target: string, flag: string): Promise<AsideFile> {
  const path = `${target}.partial-${randomBytes(8).toString('hex')}`;
  let handle: FileHandle;
  try {
    handle = await open(path, EXCLUSIVE, 0o666);
  } catch (err) {
    throw cannotWrite(flag, target, err as NodeJS.ErrnoException);
  }
  let closed = false;
  const close = async () => {
    if (!closed) await handle.close().catch(() => {});
    closed = true;
  };
  return {
    path,
    handle,
    async commit() {
      await handle.sync().catch(() => {});
      await close();
      await rename(path, target);
    },
    async discard() {
      await close();
      await rm(path, { force: true });
    },
  };
}

/** Writes `text` to `target` whole or not at all. */
export async function writeWhole(target: string, flag: string, text: string): Promise<void> {
  const aside = await openAside(target, flag);
  try {
    await aside.handle.writeFile(text);
    await aside.commit();
  } catch (err) {
    await aside.discard();
    throw err;
  }
}
