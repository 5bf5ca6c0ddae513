/**
 * The OpenTelemetry semantic conventions meter follows, read from their own registry: the YAML
 * model files of open-telemetry/semantic-conventions at tag v1.41.0, vendored under
 * test/fixtures/semconv-1.41.0 (Apache-2.0; see its README). Tests check what meter sends
 * against them.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';

export const SEMCONV_DIR = join(import.meta.dirname, '../fixtures/semconv-1.41.0');

export interface SemconvAttribute {
  id: string;
  /** int, double, boolean, string, string[], or the enum's members. */
  type: string | { members: { value: string }[] };
  deprecated?: unknown;
}

interface Group {
  id: string;
  type: string;
  metric_name?: string;
  instrument?: string;
  unit?: string;
  attributes?: (SemconvAttribute & { ref?: string })[];
}

const REGISTRIES = [
  'model/gen-ai/registry.yaml',
  'model/gen-ai/deprecated/registry-deprecated.yaml',
  'model/openai/registry.yaml',
  'model/server/registry.yaml',
  'model/error/registry.yaml',
  'model/http/registry.yaml',
];

const groups = (file: string) => (parse(readFileSync(join(SEMCONV_DIR, file), 'utf8')) as { groups: Group[] }).groups;

/** Every attribute the vendored registries define, by id (deprecated ones included, marked). */
export function semconvAttributes(): Map<string, SemconvAttribute> {
  const out = new Map<string, SemconvAttribute>();
  for (const file of REGISTRIES)
    for (const g of groups(file)) for (const a of g.attributes ?? []) if (a.id) out.set(a.id, a);
  return out;
}

/** The GenAI metrics the conventions define, by name: instrument and unit. */
export function semconvMetrics(): Map<string, { instrument: string; unit: string }> {
  const out = new Map<string, { instrument: string; unit: string }>();
  for (const g of groups('model/gen-ai/metrics.yaml'))
    if (g.type === 'metric' && g.metric_name) out.set(g.metric_name, { instrument: g.instrument!, unit: g.unit! });
  return out;
}

/** Checks one attribute value against its definition; returns what is wrong, or undefined. */
export function attributeProblem(
  defs: Map<string, SemconvAttribute>,
  key: string,
  value: unknown,
  allowedExtraValues: readonly string[] = [],
): string | undefined {
  const def = defs.get(key);
  if (!def) return `${key} is not in the registry`;
  if (def.deprecated) return `${key} is deprecated`;
  const t = def.type;
  if (typeof t === 'object') {
    const members = t.members.map((m) => m.value);
    return members.includes(String(value)) || allowedExtraValues.includes(String(value))
      ? undefined
      : `${key}=${String(value)} is not one of ${members.join(', ')}`;
  }
  const ok =
    (t === 'int' && Number.isInteger(value)) ||
    (t === 'double' && typeof value === 'number') ||
    (t === 'boolean' && typeof value === 'boolean') ||
    (t === 'string' && typeof value === 'string') ||
    (t === 'string[]' && Array.isArray(value) && value.every((v) => typeof v === 'string'));
  return ok ? undefined : `${key} should be ${t}, got ${JSON.stringify(value)}`;
}
