import type { Command } from 'commander';
import { loadConfig } from '../../src/config.js';
import { localStore, type CliStore } from '../../src/admin/client.js';
import { printJson, withStore } from '../context.js';

export function registerMigrate(program: Command): void {
  program
    .command('migrate')
    .description('apply pending sql/ migrations and exit')
    .option(
      '--to-timescale',
      'convert a plain PostgreSQL database to TimescaleDB mode in place (stop the sidecars first)',
    )
    .option('--json', 'print the store and the schema version as JSON')
    .action(async (opts: { json?: boolean; toTimescale?: boolean }) => {
      if (!opts.toTimescale) return withStore((store) => report(store, opts.json)); // openStore migrates
      // Loaded here: it brings pg, which the embedded store and `meter start` never need.
      const { convertToTimescale } = await import('../../src/store/timescale/convert.js');
      const { db, conversion } = await convertToTimescale(loadConfig(process.env));
      try {
        await report(localStore(db), opts.json, conversion);
      } finally {
        await db.close();
      }
    });
}

/** Where the schema now stands. */
async function report(store: CliStore, json?: boolean, conversion?: 'converted' | 'already'): Promise<void> {
  const rows = await store.call('schema.versions', {});
  const latest = rows.at(-1);
  if (json) {
    printJson({
      store: store.kind,
      ...(conversion ? { conversion } : {}),
      version: latest?.version ?? 0,
      migrations: rows,
    });
    return;
  }
  if (conversion)
    process.stdout.write(
      conversion === 'converted' ? 'converted to TimescaleDB mode\n' : 'already in TimescaleDB mode\n',
    );
  process.stdout.write(
    `schema at version ${latest?.version ?? 0} (${latest?.name ?? 'empty'}) on the ${store.kind} store\n`,
  );
}
