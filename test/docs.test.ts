import type { Command } from 'commander';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { buildProgram } from '../cli/program.js';
import { VARIABLES } from '../src/config.js';
import { packageRoot } from '../src/paths.js';
import { PLAN_ANALYTICS } from '../src/plans/plans.js';

/**
 * README is the five-minute start; the reference lives in docs/, one topic per page. What a
 * user can set, type or call is documented where they will look for it: every environment
 * variable in docs/configuration.md, every command in docs/cli.md, every endpoint in
 * docs/http-api.md; and every link between the pages leads somewhere.
 */
const page = (name: string) => readFileSync(join(packageRoot, name), 'utf8');

/** Pages other changes are writing at the same time; README links them already. */
const WRITTEN_ELSEWHERE = new Set([
  'docs/security.md',
  'docs/architecture.md',
  'docs/reconciliation.md',
  'docs/export.md',
  'docs/opentelemetry.md',
  'docs/timescaledb.md',
]);

function commandNames(cmd: Command, path: string[] = []): string[] {
  const subs = cmd.commands.filter((c) => c.name() !== 'help');
  if (subs.length === 0) return [path.join(' ')];
  return subs.flatMap((c) => commandNames(c, [...path, c.name()]));
}

describe('documentation', () => {
  it('documents every environment variable in docs/configuration.md', () => {
    const text = page('docs/configuration.md');
    const missing = VARIABLES.filter((v) => !text.includes(`\`${v}\``));
    expect(missing).toEqual([]);
  });

  it('documents every command in docs/cli.md', () => {
    const text = page('docs/cli.md');
    const names = commandNames(buildProgram());
    expect(names.length).toBeGreaterThan(20);
    expect(names.filter((n) => !text.includes(`meter ${n}`))).toEqual([]);
  });

  it('documents every endpoint in docs/http-api.md', () => {
    const text = page('docs/http-api.md');
    const endpoints = ['/healthz', '/readyz', '/metrics', '/proxy/', ...PLAN_ANALYTICS.map((e) => `/analytics/${e}`)];
    expect(endpoints.filter((e) => !text.includes(e))).toEqual([]);
  });

  it('keeps README short, and every link of README and docs/ leads to a page that exists', () => {
    expect(page('README.md').split('\n').length).toBeLessThan(250);
    const pages = ['README.md', ...readdirSync(join(packageRoot, 'docs')).map((f) => `docs/${f}`)];
    const broken: string[] = [];
    for (const from of pages.filter((p) => p.endsWith('.md'))) {
      for (const [, target] of page(from).matchAll(/\]\(([^)#\s]+\.md)(#[^)]*)?\)/g)) {
        if (/^[a-z]+:/.test(target!)) continue;
        const to = resolve(dirname(join(packageRoot, from)), target!);
        const rel = to.slice(packageRoot.length + 1);
        if (!existsSync(to) && !WRITTEN_ELSEWHERE.has(rel)) broken.push(`${from} → ${target}`);
      }
    }
    expect(broken).toEqual([]);
  });
});
