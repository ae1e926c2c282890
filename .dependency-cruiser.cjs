/**
 * Layering of DESIGN.md §2, enforced by `npm run lint:layers`.
 *   events <- projections <- router/placement <- router (shell)
 *   replay uses events, projections and router/placement, never a gRPC server
 *   worker and router share only the generated proto and src/shared
 *   the client (shipped to users) sees only the generated proto and src/shared
 * Pure modules import no I/O: no fs, net, lmdb, child_process, timers, worker threads.
 */
// src/events/index.ts is the events layer's public face for shells: it re-exports the LMDB log
// and JSONL streams, so pure modules import the vocabulary files directly instead.
// The router's pure core: decisions as functions of state (and time given as an argument) that
// return events. The shell (gRPC handlers, timers, the log) calls them.
const ROUTER_CORE = [
  '^src/router/errors\\.ts$',
  '^src/router/calls/call-steps\\.ts$',
  '^src/router/consequences/',
  '^src/router/liveness/(reaper|probe-outcome)\\.ts$',
  '^src/router/registry/report-events\\.ts$',
  '^src/router/sessions/turn-queue\\.ts$',
  '^src/router/startup/startup-events\\.ts$',
];
const PURE = [
  '^src/events/(?!index\\.ts$)[^/]+\\.ts$',
  '^src/projections/',
  '^src/router/placement/',
  '^src/shared/',
  '^replay/engine/',
  ...ROUTER_CORE,
];
const IO_MODULES = [
  '^(node:)?(fs|fs/promises|net|tls|http|http2|https|dgram|dns|child_process|cluster|worker_threads|timers|timers/promises|readline|os|process|v8|vm)$',
  '^lmdb$',
  '^@grpc/',
  '^pino',
];

module.exports = {
  forbidden: [
    {
      name: 'pure-imports-io',
      comment: 'Pure modules (events vocabulary, projections, placement, shared) must not do I/O.',
      severity: 'error',
      from: { path: PURE },
      to: { path: IO_MODULES },
    },
    {
      name: 'pure-imports-io-by-path',
      comment: 'Pure modules must not import the I/O parts of the events layer.',
      severity: 'error',
      from: { path: PURE },
      to: { path: '^src/events/(lmdb/|jsonl/|index\\.ts$)' },
    },
    {
      name: 'events-are-the-bottom',
      comment: 'src/events depends on nothing of readie but src/shared.',
      severity: 'error',
      from: { path: '^src/events/' },
      to: { path: '^src/(projections|router|worker|client|cli)/|^replay/' },
    },
    {
      name: 'projections-above-events-only',
      severity: 'error',
      from: { path: '^src/projections/' },
      to: { path: '^src/(router|worker|client|cli)/|^replay/' },
    },
    {
      name: 'placement-is-below-the-router-shell',
      comment: 'Placement is pure: it sees events, projections and shared code only.',
      severity: 'error',
      from: { path: '^src/router/placement/' },
      to: { path: '^src/router/(?!placement/)|^src/(worker|client|cli|proto)/|^replay/' },
    },
    {
      name: 'router-core-imports-no-shell',
      comment:
        'The router core is pure: it sees placement and other core modules, never the shell.',
      severity: 'error',
      from: { path: ROUTER_CORE },
      to: { path: '^src/router/', pathNot: ['^src/router/placement/', ...ROUTER_CORE] },
    },
    {
      name: 'worker-never-imports-router',
      severity: 'error',
      from: { path: '^src/worker/' },
      to: { path: '^src/router/|^replay/' },
    },
    {
      name: 'router-never-imports-worker',
      severity: 'error',
      from: { path: '^src/router/' },
      to: { path: '^src/worker/|^replay/' },
    },
    {
      name: 'client-sees-proto-and-shared-only',
      comment:
        "src/client runs in users' programs: it may import the generated proto and src/shared, " +
        'never the router, the worker, the CLI, replay or the event log.',
      severity: 'error',
      from: { path: '^src/client/' },
      to: { path: '^src/(?!client/|proto/gen/|shared/)|^replay/|^bin/' },
    },
    {
      name: 'replay-never-serves',
      comment: 'replay reads logs offline: events, projections and placement only, never gRPC.',
      severity: 'error',
      from: { path: '^replay/' },
      to: { path: '^src/router/(?!placement/)|^src/(worker|client|proto)/|^@grpc/' },
    },
    {
      name: 'local-cluster-runs-commands',
      comment: 'readie up starts the router and workers as processes; it never imports them.',
      severity: 'error',
      from: { path: '^src/cluster/' },
      to: { path: '^src/(router|worker|client)/|^replay/' },
    },
    {
      name: 'no-circular',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default'],
      extensions: ['.ts', '.js'],
    },
    moduleSystems: ['es6', 'cjs'],
  },
};
