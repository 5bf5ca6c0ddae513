import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { openEmbedded } from '../../src/store/embedded.js';
import { buildTemplate, templateFingerprint, usableTemplate } from '../../src/store/embedded-template.js';
import { migrate } from '../../src/store/migrate.js';
import type { Db } from '../../src/store/types.js';
import { atFileEnd, tempDirAtFileEnd } from '../helpers/cleanup.js';

/** Everything migrations create, in a comparable form. */
async function schemaOf(db: Db) {
  const q = (sql: string) => db.query(sql);
  return {
    columns:
      await q(`SELECT table_name, column_name, data_type, column_default, is_nullable FROM information_schema.columns
                       WHERE table_schema = 'public' ORDER BY 1, 2`),
    indexes: await q(`SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' ORDER BY 1`),
    constraints: await q(`SELECT conname, pg_get_constraintdef(oid) AS def FROM pg_constraint
                           WHERE connamespace = 'public'::regnamespace ORDER BY 1, 2`),
    triggers: await q(`SELECT tgname, pg_get_triggerdef(oid) AS def FROM pg_trigger WHERE NOT tgisinternal ORDER BY 1`),
    functions: await q(`SELECT proname, prosrc FROM pg_proc WHERE pronamespace = 'public'::regnamespace ORDER BY 1, 2`),
    plans: await q(`SELECT to_jsonb(p) - 'created_at' - 'updated_at' AS plan FROM plans p ORDER BY name`),
    migrations: await q(`SELECT version, name FROM schema_migrations ORDER BY version`),
  };
}

it(
  'a new data directory starts from the template: the same database as initdb and every migration',
  { timeout: 180_000 },
  async () => {
    // The template `npm run build` made, or (a checkout without a build) one made here.
    let templateDir: string | undefined;
    if (!usableTemplate()) {
      templateDir = tempDirAtFileEnd('meter-template-');
      await buildTemplate(templateDir);
    }
    const dataDir = tempDirAtFileEnd('meter-from-template-');
    const fromTemplate = await openEmbedded(dataDir, templateDir ? { template: templateDir } : {});
    atFileEnd(() => fromTemplate.close());
    expect(existsSync(join(dataDir, 'pgdata', 'PG_VERSION'))).toBe(true);
    expect(await migrate(fromTemplate)).toEqual([]); // nothing left to apply

    const migrated = await openEmbedded(undefined, { template: false });
    atFileEnd(() => migrated.close());
    expect((await migrate(migrated)).length).toBeGreaterThan(0);

    expect(await schemaOf(fromTemplate)).toEqual(await schemaOf(migrated));

    // Data written to it survives a restart like any store's (it is not reloaded from the template).
    await fromTemplate.exec(`INSERT INTO accounts (name, plan) VALUES ('kept', 'free')`);
    await fromTemplate.close();
    const again = await openEmbedded(dataDir, templateDir ? { template: templateDir } : {});
    atFileEnd(() => again.close());
    expect(await again.query(`SELECT name FROM accounts WHERE name = 'kept'`)).toEqual([{ name: 'kept' }]);
  },
);

it('a template whose fingerprint does not match the migrations is not used', () => {
  const dir = tempDirAtFileEnd('meter-stale-template-');
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'pgdata.tar.gz'), 'not used');
  expect(usableTemplate(dir)).toBeUndefined(); // no fingerprint
  const other = tempDirAtFileEnd('meter-stale-template-');
  writeFileSync(join(other, 'pgdata.tar.gz'), 'not used');
  writeFileSync(join(other, 'fingerprint'), 'f'.repeat(64) + '\n');
  expect(usableTemplate(other)).toBeUndefined(); // another PGlite or other migrations
  const current = tempDirAtFileEnd('meter-stale-template-');
  writeFileSync(join(current, 'pgdata.tar.gz'), 'x');
  writeFileSync(join(current, 'fingerprint'), templateFingerprint() + '\n');
  expect(usableTemplate(current)).toBe(join(current, 'pgdata.tar.gz'));
});
