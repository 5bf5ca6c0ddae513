import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.js';
import { tempDir } from '../helpers/stores.js';

describe('meter pricing show', () => {
  it('prints the catalogue prices of a model, and JSON with --json', async () => {
    const text = await runCli(['pricing', 'show', 'anthropic', 'claude-sonnet-4-5']);
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/cache write \(1h\)\s+6\s+12/);
    const json = await runCli(['pricing', 'show', 'openai', 'gpt-4o', '--json']);
    expect(JSON.parse(json.stdout)).toMatchObject({ provider: 'openai', model: 'gpt-4o', priced: true, source: 'catalogue' });
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
    expect(res.stderr.trim()).toBe('meter: unknown provider "acme": expected one of openai, anthropic, groq, gemini, mistral, together, cohere, deepseek, xai');
    const unknown = await runCli(['pricing', 'show', 'openai', 'no-such-model-xyz']);
    expect(unknown.code).toBe(1);
    expect(unknown.stdout).toBe('');
    expect(unknown.stderr).toBe('meter: no price for openai no-such-model-xyz: calls to it are recorded at cost 0 and flagged unpriced (add it to METER_PRICES_FILE)\n');
    const json = await runCli(['pricing', 'show', 'openai', 'no-such-model-xyz', '--json']);
    expect(json.code).toBe(1);
    expect(JSON.parse(json.stdout)).toMatchObject({ priced: false });
  });
});
