// ESLint (flat config): typescript-eslint's recommended rules, and the floors of
// docs/architecture.md held by no-restricted-imports. Formatting is Prettier's job.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import { folderPairs } from './lint/folder-pairs.js';

/** The leaf modules: anyone may import them; they import no feature. */
const LEAVES = [
  'calendar',
  'component',
  'config',
  'errors',
  'http',
  'log',
  'money',
  'paths',
  'periodic',
  'printable',
  'secret',
  'tags',
];

/** Features plug in through src/component.ts; only src/server wires them. */
const ROOT = {
  group: ['**/server/daemon.js', '**/server/components.js'],
  message: 'features plug in through src/component.ts; only src/server wires them',
};

/** A floor: in `files`, imports matching `group` (gitignore-style patterns) are refused. */
const floor = (files, patterns, ignores = []) => ({
  files,
  ignores,
  rules: { '@typescript-eslint/no-restricted-imports': ['error', { patterns }] },
});

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', 'coverage/', 'src/store/embedded-worker.js'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      // `_`-prefixed names and rest siblings are left out on purpose.
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', ignoreRestSiblings: true },
      ],
      // Terminal escapes and NUL bytes are matched on purpose.
      'no-control-regex': 'off',
    },
  },
  // Folders of src depend one way: two that import each other fail, but for the pairs
  // docs/architecture.md explains ("Folders that import each other").
  {
    files: ['src/**/*.ts'],
    plugins: { meter: { rules: { 'folder-pairs': folderPairs } } },
    rules: {
      'meter/folder-pairs': ['error', { allowed: ['admin<>reconcile', 'component<>store', 'metering<>store'] }],
    },
  },
  // Plain JavaScript helpers run in Node; TypeScript's checker, not no-undef, knows its globals.
  { files: ['**/*.js', '**/*.mjs'], rules: { 'no-undef': 'off' } },
  // Only the composition root (src/server) knows the daemon and its wiring. Flat config keeps
  // the last setting of a rule per file, so every floor below repeats this pattern.
  floor(['src/**'], [ROOT], ['src/server/**']),
  // Leaves import no feature: only each other (types of the lower floors for the component interface).
  floor(
    LEAVES.filter((l) => l !== 'component' && l !== 'config').map((l) => `src/${l}.ts`),
    [{ group: ['./*/', '../*'], message: 'a leaf module imports no feature folder' }],
  ),
  floor(
    ['src/component.ts'],
    [
      {
        group: ['./*/', '!./store/', '!./metrics/'],
        message: 'the component interface is a leaf',
        allowTypeImports: true,
      },
    ],
  ),
  // The store is the lowest feature floor: no server, admin or metering code in it (the event
  // writer only names metering's event types).
  floor(
    ['src/store/**'],
    [
      ROOT,
      { group: ['**/server/*', '**/admin/*'], message: 'src/store imports no server or admin code' },
      { group: ['**/metering/*'], message: 'src/store imports only types of src/metering', allowTypeImports: true },
    ],
  ),
  // meter top reads only through src/top (named statements) and the leaf modules.
  floor(
    ['cli/top/**'],
    [
      {
        group: ['../../src/*', '!../../src/top', ...LEAVES.map((l) => `!../../src/${l}.js`), '../*.js', '../commands/'],
        message: 'cli/top reads only through src/top and the leaf modules (src/money.ts, src/calendar.ts, …)',
      },
    ],
  ),
);
