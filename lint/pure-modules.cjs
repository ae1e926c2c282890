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
  // The worker's pure modules: its errors, the call header's checks, container specs and exit
  // causes, the mountinfo parser, the executor link's frames and messages, the install command.
  { glob: 'src/worker/errors.ts', path: '^src/worker/errors\\.ts$' },
  { glob: 'src/worker/gpu-memory.ts', path: '^src/worker/gpu-memory\\.ts$' },
  { glob: 'src/worker/execution/call-header.ts', path: '^src/worker/execution/call-header\\.ts$' },
  {
    glob: 'src/worker/sandbox/container-spec.ts',
    path: '^src/worker/sandbox/container-spec\\.ts$',
  },
  { glob: 'src/worker/sandbox/exit-cause.ts', path: '^src/worker/sandbox/exit-cause\\.ts$' },
  { glob: 'src/worker/sandbox/cgroup-mounts.ts', path: '^src/worker/sandbox/cgroup-mounts\\.ts$' },
  { glob: 'src/worker/sandbox/zygote-events.ts', path: '^src/worker/sandbox/zygote-events\\.ts$' },
  { glob: 'src/worker/executor-link/frames.ts', path: '^src/worker/executor-link/frames\\.ts$' },
  {
    glob: 'src/worker/executor-link/messages.ts',
    path: '^src/worker/executor-link/messages\\.ts$',
  },
  {
    glob: 'src/worker/packages/install-command.ts',
    path: '^src/worker/packages/install-command\\.ts$',
  },
  {
    glob: 'src/worker/residency/eviction-plan.ts',
    path: '^src/worker/residency/eviction-plan\\.ts$',
  },
  // Generated messages without services (plain data and its wire codec).
  { glob: 'src/proto/gen/readie/v1/call.ts', path: '^src/proto/gen/readie/v1/call\\.ts$' },
  // The standard error details a shed carries (google.rpc.Status, RetryInfo) and their types.
  { glob: 'src/proto/gen/google/**/*.ts', path: '^src/proto/gen/google/' },
];

/** Files inside a pure entry that are not pure. */
const IMPURE_EXCEPTIONS = [{ glob: 'src/events/index.ts', path: '^src/events/index\\.ts$' }];

module.exports = { PURE_MODULES, IMPURE_EXCEPTIONS };
