/**
 * The pure modules: no I/O, no clock, no randomness, no module-level mutable state. Purity goes
 * by folder: every `.ts` file in a pure folder is pure, so a module is checked the moment it lands
 * there, and a module that needs I/O lives in a shell folder instead. The one list, read by
 * `.dependency-cruiser.cjs` (which imports they may make) and `eslint.config.js` (which globals,
 * imports and module-level state they may use) through `PURE_MODULES`: each entry names the same
 * files twice, as a `glob` for eslint and as a `path` (a regular expression over the path) for
 * dependency-cruiser.
 */

/**
 * The pure folders. `nested: false` takes only the files directly in the folder (the events
 * layer's I/O parts, log/, lmdb/, jetstream/, open/ and jsonl/, are its subfolders).
 */
const PURE_FOLDERS = [
  { folder: 'src/events', nested: false },
  // The binary event codec: bytes in, events out.
  { folder: 'src/events/codec' },
  { folder: 'src/projections' },
  { folder: 'src/core' },
  { folder: 'src/shared' },
  { folder: 'replay/engine' },
  // The worker's policies and parsers: slots, standbys, idle expiry, version eviction,
  // registration retries, call headers, container specs, executor frames, errors.
  { folder: 'src/worker/core' },
  // The standard error details a shed carries (google.rpc.Status, RetryInfo) and their types.
  { folder: 'src/proto/gen/google' },
];

/**
 * Generated files that are pure although their folder is not: ts-proto writes a proto file's
 * messages where its package puts them, beside the files with grpc-js services. Plain messages
 * and their wire codec only.
 */
const PURE_GENERATED_FILES = ['src/proto/gen/readie/v1/call.ts'];

/** Files inside a pure folder that are not pure: the events layer's index re-exports its I/O. */
const IMPURE_FILES = ['src/events/index.ts'];

/** `text` as a regular expression that matches it literally. */
function literal(text) {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** A file as a lint entry. */
function fileEntry(file) {
  return { glob: file, path: `^${literal(file)}$` };
}

/** A pure folder as a lint entry. */
function folderEntry({ folder, nested = true }) {
  return nested
    ? { glob: `${folder}/**/*.ts`, path: `^${literal(folder)}/` }
    : { glob: `${folder}/*.ts`, path: `^${literal(folder)}/[^/]+\\.ts$` };
}

const PURE_MODULES = [...PURE_FOLDERS.map(folderEntry), ...PURE_GENERATED_FILES.map(fileEntry)];
const IMPURE_EXCEPTIONS = IMPURE_FILES.map(fileEntry);

/** Whether the module at `path` (relative to the repository, `/`-separated) is pure. */
function isPureModule(path) {
  const matches = (entry) => new RegExp(entry.path).test(path);
  return PURE_MODULES.some(matches) && !IMPURE_EXCEPTIONS.some(matches);
}

module.exports = { PURE_FOLDERS, PURE_MODULES, IMPURE_EXCEPTIONS, isPureModule };
