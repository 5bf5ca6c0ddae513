import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { waitForUpdate } from '@pydantic/genai-prices';
import { migrate } from '../../src/store/migrate.js';
import { openPostgres } from '../../src/store/postgres.js';
import { makeEvent, seedEvents } from '../analytics/helpers/seed.js';
import { atFileEnd } from '../helpers/cleanup.js';
import { runCli } from '../helpers/cli.js';
import { createTestDatabase, postgresUrl, tempDir } from '../helpers/stores.js';

describe('meter pricing show', { timeout: 60_000 }, () => {
  // each test starts 2–3 CLI processes from the source
  it('prints the catalogue prices of a model, and JSON with --json', async () => {
    const text = await runCli(['pricing', 'show', 'anthropic', 'claude-sonnet-4-5']);
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/cache write \(1h\)\s+6\s+12/);
    const json = await runCli(['pricing', 'show', 'openai', 'gpt-4o', '--json']);
    expect(JSON.parse(json.stdout)).toMatchObject({
      provider: 'openai',
      model: 'gpt-4o',
      priced: true,
      source: 'catalogue',
    });
  });

  it('uses METER_PRICES_FILE overrides, and names a malformed file', async () => {
    const dir = tempDir();
    const good = join(dir, 'prices.yaml');
    writeFileSync(good, 'providers:\n  openai:\n    models:\n      my-ft: { input_mtok: "0.5", output_mtok: "2" }\n');
    const res = await runCli(['pricing', 'show', 'openai', 'my-ft', '--json'], { METER_PRICES_FILE: good });
    expect(JSON.parse(res.stdout)).toMatchObject({ priced: true, source: 'override' });
    const bad = join(dir, 'bad.json');
    writeFileSync(bad, '{"providers": {"openai": {"models": {"x": {"input_mtok": "1,5"}}}}}');
    const err = await runCli(['pricing', 'show', 'openai', 'x'], { METER_PRICES_FILE: bad });
    expect(err.code).toBe(1);
    expect(err.stderr).toContain('bad.json');
    expect(err.stderr).toContain('input_mtok');
  });

  it('refuses an unknown provider and says which are allowed; an unknown model exits 1', async () => {
    const res = await runCli(['pricing', 'show', 'acme', 'm']);
    expect(res.code).toBe(2);
    expect(res.stderr.trim()).toBe(
      'meter: unknown provider "acme": expected one of openai, anthropic, groq, gemini, mistral, together, cohere, deepseek, xai',
    );
    const unknown = await runCli(['pricing', 'show', 'openai', 'no-such-model-xyz']);
    expect(unknown.code).toBe(1);
    expect(unknown.stdout).toBe('');
    expect(unknown.stderr).toBe(
      'meter: no price for openai no-such-model-xyz: calls to it are recorded at cost 0 and flagged unpriced (add it to METER_PRICES_FILE)\n',
    );
    const json = await runCli(['pricing', 'show', 'openai', 'no-such-model-xyz', '--json']);
    expect(json.code).toBe(1);
    expect(JSON.parse(json.stdout)).toMatchObject({ priced: false });
  });
});

describe('meter pricing show / update / reprice', () => {
  let base: string;
  beforeAll(async () => {
    const providers = (await waitForUpdate())!;
    const good = JSON.stringify(providers);
    const server = createServer((req, res) => {
      if (req.url === '/data.json') return res.writeHead(200).end(good);
      if (req.url === '/corrupt.json') return res.writeHead(200).end(good.slice(0, 1000));
      res.writeHead(404).end();
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    atFileEnd(
      () =>
        new Promise<void>((r) => {
          server.closeAllConnections();
          server.close(() => r());
        }),
    );
  });

  it('shows the table in force; update saves a checked copy that show then names; a corrupt file changes nothing', async () => {
    const env = { METER_DATA_DIR: tempDir() };
    const before = await runCli(['pricing', 'show', '--json'], env);
    expect(before.code).toBe(0);
    expect(JSON.parse(before.stdout)).toMatchObject({
      price_version: 'genai-prices@0.1.8',
      origin: 'bundled',
      remote: null,
    });

    const bad = await runCli(['pricing', 'update', '--from', `${base}/corrupt.json`], env);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(
      /^meter: price data from http:\/\/127\.0\.0\.1:\d+\/corrupt\.json not used: not valid JSON .*; the table in force is unchanged\n$/,
    );

    const upd = await runCli(['pricing', 'update', '--from', `${base}/data.json`, '--json'], env);
    expect(upd.code).toBe(0);
    const table = JSON.parse(upd.stdout) as { table: string; origin: string; models: number };
    expect(table).toMatchObject({ origin: 'downloaded', source: `${base}/data.json` });
    expect(table.table).toMatch(/^genai-prices-data@[0-9a-f]{12}$/);
    const after = await runCli(['pricing', 'show'], env);
    expect(after.stdout).toContain(`price version  ${table.table}`);
    expect(after.stdout).toContain(`downloaded from ${base}/data.json`);
    const model = await runCli(['pricing', 'show', 'openai', 'gpt-4o', '--json'], env);
    expect(JSON.parse(model.stdout)).toMatchObject({ priced: true, price_version: table.table });

    const reset = await runCli(['pricing', 'update', '--reset'], env);
    expect(reset.stdout).toContain('the bundled catalogue (genai-prices@0.1.8) is used');
    expect(JSON.parse((await runCli(['pricing', 'show', '--json'], env)).stdout)).toMatchObject({ origin: 'bundled' });
  }, 180_000);

  it('usage errors exit 2 with one line', async () => {
    const half = await runCli(['pricing', 'show', 'openai']);
    expect(half.code).toBe(2);
    expect(half.stderr).toBe('meter: give both a provider and a model, or neither\n');
    const since = await runCli(['pricing', 'reprice', '--since', 'last week']);
    expect(since.code).toBe(2);
    expect(since.stderr).toBe(
      'meter: --since "last week" is not a date: expected YYYY-MM-DD (UTC) or an ISO timestamp\n',
    );
  }, 120_000);

  it.skipIf(!postgresUrl)(
    'reprice on PostgreSQL: logs what it changed, --json reports it',
    async () => {
      const databaseUrl = await createTestDatabase();
      const db = openPostgres(databaseUrl);
      atFileEnd(() => db.close());
      await migrate(db);
      await seedEvents(db, [
        makeEvent({
          accountId: randomUUID(),
          time: '2026-11-02T10:00:00.000Z',
          provider: 'groq',
          model: 'acme-llm',
          requestedModel: 'acme-llm',
          cost: '0.00000000',
          unpriced: true,
          inputTokens: 1000,
          outputTokens: 1000,
        }),
      ]);
      const dir = tempDir();
      const prices = join(dir, 'prices.yaml');
      writeFileSync(prices, 'providers:\n  groq:\n    models:\n      acme-llm: { input_mtok: 1, output_mtok: 2 }\n');
      const env = { DATABASE_URL: databaseUrl, METER_DATA_DIR: dir, METER_PRICES_FILE: prices };
      const text = await runCli(['pricing', 'reprice', '--since', '2026-11-01'], env);
      expect(text.code).toBe(0);
      // 1000 × $1 + 1000 × $2 per million = $0.003
      expect(text.stdout).toContain('repriced 1 call of groq acme-llm (as acme-llm): +$0.00300000');
      expect(text.stdout).toMatch(
        /1 of 1 unpriced call since 2026-11-01T00:00:00\.000Z priced with genai-prices@0\.1\.8\+ovr:[0-9a-f]{8}: \+\$0\.00300000 on 1 day/,
      );
      const json = await runCli(['pricing', 'reprice', '--since', '2026-11-01', '--json'], env);
      expect(JSON.parse(json.stdout)).toMatchObject({ examined: 0, repriced: 0, cost_added: '0.00000000' });
    },
    120_000,
  );
});
