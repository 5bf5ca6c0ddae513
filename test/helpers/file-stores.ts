import type { Db } from '../../src/store/types.js';
import { backends, createTestDatabase } from './stores.js';

/** A fresh migrated store of one back-end, released when the test file ends. */
export async function openStoreForFile(kind: 'postgres' | 'embedded'): Promise<Db> {
  return backends.find((b) => b.name === kind)!.open();
}

export async function storeConfigForFile(
  kind: 'postgres' | 'embedded',
): Promise<{ databaseUrl?: string; dataDir: string }> {
  return backends.find((b) => b.name === kind)!.config();
}

export const databaseForFile = createTestDatabase;
