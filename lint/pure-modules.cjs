/**
 * The pure modules: no I/O, no clock, no randomness, no module-level mutable state. The one list,
 * read by `.dependency-cruiser.cjs` (which imports they may make) and `eslint.config.js` (which
 * globals and module-level state they may use). Each entry names the same files twice: `glob`
 * for eslint, `path` (a regular expression over the path) for dependency-cruiser.
 */
const PURE_MODULES = [
  // The event vocabulary (its I/O parts, lmdb/ and jsonl/, and the index that re-exports them
  // are not pure; see IMPURE_EXCEPTIONS).
  { glob: 'src/events/*.ts', path: '^src/events/[^/]+\\.ts$' },
  { glob: 'src/projections/**/*.ts', path: '^src/projections/' },
  { glob: 'src/core/**/*.ts', path: '^src/core/' },
  { glob: 'src/shared/**/*.ts', path: '^src/shared/' },
  { glob: 'replay/engine/**/*.ts', path: '^replay/engine/' },
];

/** Files inside a pure entry that are not pure. */
const IMPURE_EXCEPTIONS = [{ glob: 'src/events/index.ts', path: '^src/events/index\\.ts$' }];

module.exports = { PURE_MODULES, IMPURE_EXCEPTIONS };
