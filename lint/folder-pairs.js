// An ESLint rule that holds the folders of src to one direction: two folders that import each
// other (a two-way pair) fail lint, except the few pairs docs/architecture.md explains. A folder
// is src/<name>/**, a leaf module src/<name>.ts is one by itself; type imports count too.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const SRC = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'src');

/** Relative specifiers of a file's imports, re-exports and dynamic imports. */
const SPECIFIERS = /(?:^|[;\n}])\s*(?:import|export)\s[^'"]*?from\s*'(\.[^']+)'|\bimport\(\s*'(\.[^']+)'\s*\)/g;

/** The folder of src a path belongs to, or undefined outside src. */
export function folderOf(file) {
  const rel = path.relative(SRC, file);
  if (rel.startsWith('..') || path.isAbsolute(rel)) return undefined;
  const [first, ...rest] = rel.split(path.sep);
  return rest.length === 0 ? first.replace(/\.[cm]?[jt]s$/, '') : first;
}

/** Every folder-to-folder import of src: Map "a>b" → the first file of a that imports b. */
export function folderGraph() {
  const edges = new Map();
  const walk = (dir) => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      const file = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(file);
      else if (/\.ts$/.test(entry.name)) {
        for (const m of fs.readFileSync(file, 'utf8').matchAll(SPECIFIERS)) {
          const from = folderOf(file);
          const to = folderOf(path.resolve(dir, m[1] ?? m[2]));
          const key = `${from}>${to}`;
          if (to !== undefined && from !== to && !edges.has(key)) edges.set(key, path.relative(SRC, file));
        }
      }
    }
  };
  walk(SRC);
  return edges;
}

let graph;

/** @param allowed pairs "a<>b" (either order) that may import each other */
export const folderPairs = {
  meta: {
    type: 'problem',
    docs: { description: 'two folders of src do not import each other (docs/architecture.md)' },
    schema: [{ type: 'object', properties: { allowed: { type: 'array', items: { type: 'string' } } } }],
  },
  create(context) {
    const from = folderOf(context.filename);
    if (from === undefined) return {};
    graph ??= folderGraph();
    const allowed = new Set(
      (context.options[0]?.allowed ?? []).flatMap((p) => [p, p.split('<>').reverse().join('<>')]),
    );
    const check = (source) => {
      if (typeof source?.value !== 'string' || !source.value.startsWith('.')) return;
      const to = folderOf(path.resolve(path.dirname(context.filename), source.value));
      if (to === undefined || to === from || allowed.has(`${from}<>${to}`)) return;
      const back = graph.get(`${to}>${from}`);
      if (back)
        context.report({
          node: source,
          message: `src/${from} and src/${to} would import each other (src/${back} imports src/${from}): move the shared part to a lower folder (docs/architecture.md)`,
        });
    };
    return {
      ImportDeclaration: (node) => check(node.source),
      ExportNamedDeclaration: (node) => check(node.source),
      ExportAllDeclaration: (node) => check(node.source),
      ImportExpression: (node) => check(node.source),
    };
  },
};
