import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pino from 'pino';
import ts from 'typescript';
import { beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { packageRoot } from '../../src/paths.js';
import { components } from '../../src/server/components.js';
import { startDaemon } from '../../src/server/daemon.js';
import { atFileEnd, tempDirAtFileEnd } from '../helpers/cleanup.js';
import { databaseForFile } from '../helpers/file-stores.js';
import { promtool, scrape } from '../helpers/prom-text.js';
import { hasTool, PROMTOOL_INSTALL } from '../helpers/tools.js';

const hasPromtool = hasTool('promtool', PROMTOOL_INSTALL);

/**
 * deploy/grafana/meter.json, without a Grafana (none installs here): checked against Grafana's
 * own dashboard schema (the types of @grafana/schema, as an object literal so that a misspelt
 * key is an error), laid out on the 24-column grid, every PromQL expression parsed by
 * Prometheus's promtool, and every metric it reads exposed by a real /metrics.
 */
const FILE = join(packageRoot, 'deploy/grafana/meter.json');
const text = readFileSync(FILE, 'utf8');
interface Target {
  refId: string;
  expr: string;
  legendFormat?: string;
}
interface PanelJson {
  id: number;
  type: string;
  title: string;
  gridPos: { x: number; y: number; w: number; h: number };
  targets?: Target[];
  fieldConfig?: { defaults: { unit?: string } };
}
const dashboard = JSON.parse(text) as {
  uid: string;
  title: string;
  schemaVersion: number;
  panels: PanelJson[];
  templating: { list: { name: string }[] };
};
const panels = dashboard.panels;
const targets = panels.flatMap((p) => (p.targets ?? []).map((t) => ({ panel: p, ...t })));

/** Grafana's variables, as Grafana would expand them for a query. */
const expand = (expr: string) => expr.replaceAll('$__rate_interval', '5m').replaceAll('$instance', '.*');

describe('the Grafana dashboard', () => {
  it("is a dashboard by Grafana's own schema (@grafana/schema types)", () => {
    const virtual = join(packageRoot, 'test/deploy/__dashboard_schema_check__.ts');
    const source = `import type { Dashboard, Panel, RowPanel } from '@grafana/schema';
      import type { DataQuery } from '@grafana/schema';
      /** A Prometheus query (its datasource plugin's fields, on Grafana's DataQuery). */
      type PromQuery = DataQuery & { expr: string; legendFormat?: string; range?: boolean; instant?: boolean; interval?: string };
      type MeterPanel = Omit<Panel, 'targets'> & { targets?: PromQuery[] };
      type MeterDashboard = Omit<Dashboard, 'panels'> & { panels: Array<MeterPanel | RowPanel> };
      /** As JSON: a string enum (ThresholdsMode) is its string values. */
      type Json<T> = T extends string ? \`\${T}\` : T extends (infer U)[] ? Json<U>[] : T extends object ? { [K in keyof T]: Json<T[K]> } : T;
      export const dashboard: Json<MeterDashboard> = ${text};`;
    const options: ts.CompilerOptions = {
      strict: true,
      noEmit: true,
      skipLibCheck: true,
      types: [],
      target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
    };
    const host = ts.createCompilerHost(options);
    const getSourceFile = host.getSourceFile.bind(host);
    host.getSourceFile = (name, lang, ...rest) =>
      name === virtual ? ts.createSourceFile(name, source, lang) : getSourceFile(name, lang, ...rest);
    const fileExists = host.fileExists.bind(host);
    host.fileExists = (name) => name === virtual || fileExists(name);
    const program = ts.createProgram([virtual], options, host);
    const problems = ts.getPreEmitDiagnostics(program).map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'));
    expect(problems).toEqual([]);
    // and what Grafana requires to import it
    expect(dashboard.uid).toMatch(/^[a-zA-Z0-9_-]{1,40}$/);
    expect(dashboard.schemaVersion).toBeGreaterThanOrEqual(36);
    expect(dashboard.templating.list.map((v) => v.name)).toEqual(['datasource', 'instance']);
  }, 60_000);

  it('lays its panels out on the 24-column grid without overlaps, ids and refIds unique', () => {
    expect(new Set(panels.map((p) => p.id)).size).toBe(panels.length);
    const cells = new Set<string>();
    for (const p of panels) {
      const { x, y, w, h } = p.gridPos;
      expect(x + w, p.title).toBeLessThanOrEqual(24);
      for (let i = x; i < x + w; i++) {
        for (let j = y; j < y + h; j++) {
          expect(cells.has(`${i},${j}`), `${p.title} overlaps at ${i},${j}`).toBe(false);
          cells.add(`${i},${j}`);
        }
      }
      const refIds = (p.targets ?? []).map((t) => t.refId);
      expect(new Set(refIds).size, p.title).toBe(refIds.length);
      if (p.type !== 'row') expect(refIds.length, p.title).toBeGreaterThan(0);
    }
  });

  it.skipIf(!hasPromtool)('has PromQL that Prometheus parses', () => {
    const dir = tempDirAtFileEnd('meter-grafana-');
    const rules = join(dir, 'rules.yml');
    // every expression as a recording rule: `promtool check rules` parses each with Prometheus's own parser
    const list = targets
      .map((t, i) => `      - record: dashboard:expr_${i}\n        expr: ${JSON.stringify(expand(t.expr))}`)
      .join('\n');
    writeFileSync(rules, `groups:\n  - name: dashboard\n    rules:\n${list}\n`);
    const check = promtool(['check', 'rules', rules]);
    expect(check.output).toContain(`SUCCESS: ${targets.length} rules found`);
    expect(check.status).toBe(0);
  });

  it('shows spend rate, calls, errors, added latency, spool backlog and writer lag', () => {
    const panelReading = (metric: string, title: RegExp) =>
      panels.filter((p) => title.test(p.title) && (p.targets ?? []).some((t) => t.expr.includes(metric)));
    expect(panelReading('meter_cost_usd_total', /spend rate/i).length).toBeGreaterThan(0);
    expect(panelReading('meter_calls_total', /calls/i).length).toBeGreaterThan(0);
    expect(
      panelReading('meter_calls_total{instance=~"$instance",status_class=~"4xx|5xx"}', /error/i).length,
    ).toBeGreaterThan(0);
    expect(panelReading('meter_overhead_seconds_bucket', /added latency/i).length).toBeGreaterThan(0);
    expect(panelReading('meter_spool_backlog_events', /spool backlog/i).length).toBeGreaterThan(0);
    expect(panelReading('meter_writer_lag_seconds', /writer lag/i).length).toBeGreaterThan(0);
  });
});

describe('the dashboard against a real /metrics', () => {
  let exposed: Set<string>;

  beforeAll(async () => {
    const config = loadConfig({
      METER_PORT: '0',
      METER_HOST: '127.0.0.1',
      METER_DATA_DIR: tempDirAtFileEnd(),
      DATABASE_URL: await databaseForFile(),
    });
    const daemon = await startDaemon(config, pino({ level: 'silent' }), components);
    atFileEnd(() => daemon.close());
    const s = await scrape(daemon.metricsUrl);
    exposed = new Set<string>();
    for (const [name, type] of s.types) {
      exposed.add(name);
      if (type === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) exposed.add(name + suffix);
    }
  }, 120_000);

  it('reads only metrics the daemon exposes', () => {
    const referenced = new Set<string>();
    for (const t of targets) {
      const names = expand(t.expr).match(/\b(?:meter|process|nodejs)_[a-z0-9_]+\b/g) ?? [];
      expect(names.length, t.expr).toBeGreaterThan(0);
      for (const n of names) referenced.add(n);
    }
    expect([...referenced].filter((n) => !exposed.has(n))).toEqual([]);
    expect(referenced.size).toBeGreaterThanOrEqual(15);
  });
});
