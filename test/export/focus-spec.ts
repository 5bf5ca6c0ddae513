/**
 * The FOCUS 1.2 column library, read from the specification's own text: the column files of the
 * v1.2 tag (specification/columns/*.md), vendored under test/fixtures/focus-1.2 (CC BY 4.0;
 * see its README). For each column: its ID, feature level, whether it allows nulls, its data
 * type, its allowed values, and whether it must not be null on a Usage row that is not a
 * correction.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export interface FocusColumnSpec {
  id: string;
  level: string;
  nulls: boolean;
  type: string;
  /** The allowed values, when the column has a list of them. */
  values?: string[];
  /** "MUST NOT be null when ChargeCategory is "Usage" …" (the conditional columns' rule). */
  requiredOnUsage: boolean;
}

export const FOCUS_SPEC_DIR = join(import.meta.dirname, '../fixtures/focus-1.2/columns');

const cells = (line: string) =>
  line
    .trim()
    .replace(/^\||\|$/g, '')
    .split('|')
    .map((c) => c.trim());

function parseColumn(text: string): FocusColumnSpec {
  const section = (name: string) => new RegExp(`^## ${name}\\s*$\\n+([^\\n]+)`, 'mi').exec(text)?.[1]?.trim();
  const id = section('Column ID');
  if (!id) throw new Error('no "## Column ID" section');
  const constraint = (name: string) => {
    const row = text.split('\n').find((l) => new RegExp(`^\\|\\s*${name}\\s*\\|`, 'i').test(l));
    if (!row) throw new Error(`${id}: no "${name}" constraint`);
    return cells(row)[1]!;
  };
  const spec: FocusColumnSpec = {
    id,
    level: constraint('Feature level'),
    nulls: constraint('Allows nulls') === 'True',
    type: constraint('Data type'),
    requiredOnUsage: new RegExp(`${id} MUST NOT be null when \\[?ChargeCategory`).test(text),
  };
  const allowed = /^Allowed values:\s*$/im.exec(text);
  if (allowed) {
    const table = text
      .slice(allowed.index)
      .split('\n')
      .filter((l) => l.trim().startsWith('|'));
    const header = cells(table[0]!);
    const display = section('Display Name');
    let at = header.findIndex((h) => h === 'Value' || h === display);
    if (at < 0) at = 0;
    spec.values = table.slice(2).map((l) => cells(l)[at]!);
  }
  return spec;
}

/** Every column of FOCUS 1.2, by column ID. */
export function focusColumns(): Map<string, FocusColumnSpec> {
  const out = new Map<string, FocusColumnSpec>();
  for (const f of readdirSync(FOCUS_SPEC_DIR).filter((n) => n.endsWith('.md'))) {
    const spec = parseColumn(readFileSync(join(FOCUS_SPEC_DIR, f), 'utf8'));
    out.set(spec.id, spec);
  }
  return out;
}
