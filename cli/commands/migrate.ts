import type { Command } from 'commander';
import { printJson, withStore } from '../context.js';

export function registerMigrate(program: Command): void {
  program
    .command('migrate')
    .description('apply pending sql/ migrations and exit')
    .option('--json', 'print the store and the schema version as JSON')
    .action(async (opts: { json?: boolean }) => {
      // openStore applies pending migrations; report where the schema now stands.
      await withStore(async (store) => {
        const rows = await store.query<{ version: number; name: string }>(
          'SELECT version, name FROM schema_migrations ORDER BY version',
        );
        const latest = rows.at(-1);
        if (opts.json) printJson({ store: store.kind, version: latest?.version ?? 0, migrations: rows });
        else process.stdout.write(`schema at version ${latest?.version ?? 0} (${latest?.name ?? 'empty'}) on the ${store.kind} store\n`);
      });
    });
}
