import type { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { buildProgram } from '../../cli/program.js';

/** CONTRACT §1 conventions that hold for every command, checked over the real command tree. */

function leaves(cmd: Command, path: string[] = []): [string, Command][] {
  const subs = cmd.commands.filter((c) => c.name() !== 'help');
  if (subs.length === 0) return [[path.join(' '), cmd]];
  return subs.flatMap((c) => leaves(c, [...path, c.name()]));
}

describe('CLI conventions', () => {
  const all = leaves(buildProgram());

  it('every command that prints something has --json (the daemon itself prints a listening line and logs)', () => {
    expect(all.length).toBeGreaterThan(20);
    const missing = all
      .filter(([name, c]) => name !== 'start' && !c.options.some((o) => o.long === '--json'))
      .map(([name]) => name);
    expect(missing).toEqual([]);
  });

  it('every command and option says what it is for', () => {
    for (const [name, c] of all) {
      expect(c.description(), name).not.toBe('');
      for (const o of c.options) expect(o.description, `${name} ${o.long}`).not.toBe('');
    }
  });
});
