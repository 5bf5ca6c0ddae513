import type { Db } from '../../src/store/types.js';
import { backends, createTestDatabase, type Backend } from './stores.js';

/** A fresh migrated store of one back-end, released when the test file ends. */
export async function openStoreForFile(kind: Backend['name']): Promise<Db> {
  return backends.find((b) => b.name === kind)!.open();
}

export async function storeConfigForFile(kind: Backend['name']): Promise<{ databaseUrl?: string; dataDir: string }> {
  return backends.find((b) => b.name === kind)!.config();
}

export const databaseForFile = createTestDatabase;
