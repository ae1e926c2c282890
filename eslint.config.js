// @ts-check
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import mocha from 'eslint-plugin-mocha';
import pureModules from './lint/pure-modules.cjs';

const { PURE_MODULES, IMPURE_EXCEPTIONS } = pureModules;

/** Globals that make a module impure: clocks, randomness and timers. */
const impureGlobals = [
  { name: 'setTimeout', message: 'Pure modules take time as an argument or an event.' },
  { name: 'setInterval', message: 'Pure modules take time as an argument or an event.' },
  { name: 'setImmediate', message: 'Pure modules do not schedule work.' },
  { name: 'process', message: 'Pure modules do not read the environment.' },
  {
    name: 'crypto',
    message: 'Pure modules are deterministic: hash with createHash from node:crypto, nothing else.',
  },
];

const impureProperties = [
  {
    object: 'Date',
    property: 'now',
    message: 'Pure modules take time as an argument or an event.',
  },
  { object: 'Math', property: 'random', message: 'Pure modules are deterministic.' },
  { object: 'performance', property: 'now', message: 'Pure modules take time as an argument.' },
];

/**
 * node:crypto in pure modules: hashing (`createHash`) is deterministic; randomness, keys and
 * certificates are not.
 */
const cryptoImports = ['node:crypto', 'crypto'].map((name) => ({
  name,
  allowImportNames: ['createHash'],
  allowTypeImports: true,
  message:
    'Pure modules use node:crypto for hashing only (createHash): no randomness, keys or certificates.',
}));

/**
 * Module-level state in a pure module: a `let` or `var`, or a collection (`new Map()`, an array
 * literal, any `new` object) not declared read-only (`ReadonlyMap<...>`, `readonly T[]`).
 */
const moduleStateSelectors = ['Program', 'Program > ExportNamedDeclaration'].flatMap((top) => [
  `${top} > VariableDeclaration[kind!='const']`,
  `${top} > VariableDeclaration > VariableDeclarator:not([id.typeAnnotation.typeAnnotation.typeName.name=/^Readonly/]) > NewExpression.init`,
  `${top} > VariableDeclaration > VariableDeclarator:not([id.typeAnnotation.typeAnnotation.operator='readonly']) > ArrayExpression.init`,
]);

export default tseslint.config(
  {
    ignores: [
      'node_modules/',
      'dist/',
      'scratch/',
      'src/proto/gen/',
      '.readie/',
      'python/',
      'coverage/',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/switch-exhaustiveness-check': [
        'error',
        { considerDefaultExhaustiveForUnions: true },
      ],
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_' },
      ],
      eqeqeq: ['error', 'always'],
    },
  },
  {
    files: ['**/*.js', '**/*.cjs'],
    ...tseslint.configs.disableTypeChecked,
  },
  {
    // The web page's scripts (readie ui, replay report --html) run in a browser.
    files: ['src/ui/assets/**/*.js'],
    languageOptions: {
      sourceType: 'script',
      globals: Object.fromEntries(
        [
          'window',
          'document',
          'location',
          'fetch',
          'URLSearchParams',
          'FormData',
          'setInterval',
          'setTimeout',
          'Plot',
        ].map((name) => [name, 'readonly']),
      ),
    },
  },
  {
    files: ['**/*.cjs'],
    languageOptions: {
      sourceType: 'commonjs',
      globals: { module: 'writable', require: 'readonly' },
    },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
  {
    files: ['test/**/*.ts'],
    plugins: { mocha },
    rules: {
      'mocha/no-exclusive-tests': 'error',
      'mocha/no-pending-tests': 'error',
      '@typescript-eslint/no-unused-expressions': 'off',
    },
  },
  {
    // Pure modules (lint/pure-modules.cjs, by folder): no clock, no randomness, no timers, no
    // environment, node:crypto for hashing only.
    files: PURE_MODULES.map((module) => module.glob),
    ignores: IMPURE_EXCEPTIONS.map((module) => module.glob),
    rules: {
      'no-restricted-globals': ['error', ...impureGlobals],
      'no-restricted-imports': ['error', { paths: cryptoImports }],
      'no-restricted-properties': ['error', ...impureProperties],
      'no-restricted-syntax': [
        'error',
        {
          selector: "NewExpression[callee.name='Date'][arguments.length=0]",
          message: 'Pure modules take time as an argument or an event.',
        },
        {
          selector: 'ImportExpression[source.value=/^(node:)?crypto$/]',
          message: 'Pure modules use node:crypto for hashing only, imported by name (createHash).',
        },
        ...moduleStateSelectors.map((selector) => ({
          selector,
          message:
            'Pure modules keep no module-level mutable state (caches belong to their caller): ' +
            'no module-level let or var, and module-level collections are typed Readonly.',
        })),
      ],
    },
  },
);
