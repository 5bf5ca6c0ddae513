import { openEmbedded } from '../../src/store/embedded.js';
import { migrate } from '../../src/store/migrate.js';
import { openPostgres } from '../../src/store/postgres.js';
import type { Db } from '../../src/store/types.js';
import { atFileEnd, dropAtFileEnd, tempDirAtFileEnd } from './cleanup.js';
import { createTestDatabase } from './stores.js';

/** Like Backend.open/config, but safe to call from beforeAll: everything is released at the
 *  end of the file (an afterAll registered inside a hook would never run). */
export async function openStoreForFile(kind: 'postgres' | 'embedded'): Promise<Db> {
  const db = kind === 'embedded' ? await openEmbedded(tempDirAtFileEnd()) : openPostgres(await databaseForFile());
  atFileEnd(() => db.close());
  await migrate(db);
  return db;
}

export async function storeConfigForFile(kind: 'postgres' | 'embedded'): Promise<{ databaseUrl?: string; dataDir: string }> {
  const dataDir = tempDirAtFileEnd();
  return kind === 'embedded' ? { dataDir } : { databaseUrl: await databaseForFile(), dataDir };
}

export async function databaseForFile(): Promise<string> {
  const url = await createTestDatabase();
  dropAtFileEnd(url);
  return url;
}
