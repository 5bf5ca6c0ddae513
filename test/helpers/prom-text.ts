import { spawnSync } from 'node:child_process';

/** One sample line of a scrape: `name{labels} value`. */
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface Scrape {
  text: string;
  /** `# TYPE` of each family. */
  types: Map<string, string>;
  samples: Sample[];
  /** Sum of the samples named `name` whose labels include `labels`; 0 if none. */
  value(name: string, labels?: Record<string, string>): number;
}

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\d+)?$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

/** Reads the samples of a text exposition. Its syntax is checked by promtool (below); this
 *  only reads values back, so tests can compare them. */
export function parseExposition(text: string): Scrape {
  const types = new Map<string, string>();
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line.startsWith('# TYPE ')) {
      const [, , name, type] = line.split(' ');
      types.set(name!, type!);
      continue;
    }
    if (line === '' || line.startsWith('#')) continue;
    const m = SAMPLE.exec(line);
    if (!m) throw new Error(`not a sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const [, k, v] of (m[2] ?? '').matchAll(LABEL))
      labels[k!] = v!.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
    samples.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return {
    text,
    types,
    samples,
    value: (name, want = {}) =>
      samples
        .filter((s) => s.name === name && Object.entries(want).every(([k, v]) => s.labels[k] === v))
        .reduce((n, s) => n + s.value, 0),
  };
}

/** GETs a /metrics URL and reads it. */
export async function scrape(url: string): Promise<Scrape> {
  const res = await fetch(url);
  if (res.status !== 200) throw new Error(`${url} answered ${res.status}: ${await res.text()}`);
  return parseExposition(await res.text());
}

/** Prometheus's own tool: `check metrics` parses an exposition and lints its names, `check
 *  rules` parses PromQL. Debian's `prometheus` package ships it; .ci/run installs it. */
export function promtool(args: string[], input?: string): { status: number | null; output: string } {
  const r = spawnSync('promtool', args, { input, encoding: 'utf8' });
  if (r.error) throw new Error(`promtool could not be run (apt-get install prometheus): ${r.error.message}`);
  return { status: r.status, output: `${r.stdout}${r.stderr}`.trim() };
}
