/**
 * The layering, enforced by `npm run lint:layers` (docs/development.md says why):
 *   events <- projections <- core <- router (shell)
 *   replay uses events, projections and core, never a gRPC server, never the router shell
 *   worker and router share only the generated proto and src/shared
 *   the client (shipped to users) sees only the generated proto and src/shared
 *   src/net (network diagnostics) is a leaf the client, router and worker share
 *   src/host (host I/O: files of secrets) is a leaf the router and worker share
 *   the worker's core (src/worker/core) sees nothing of the worker's shell
 * Pure modules (lint/pure-modules.cjs: by folder) import no I/O: no fs, net, lmdb, NATS, child_process, timers,
 * worker threads, and not the I/O parts of the events layer.
 */
const { PURE_MODULES, IMPURE_EXCEPTIONS } = require('./lint/pure-modules.cjs');

// src/events/index.ts is the events layer's public face for shells: it re-exports the LMDB log
// and JSONL streams, so pure modules import the vocabulary files directly instead.
const PURE = {
  path: PURE_MODULES.map((m) => m.path),
  pathNot: IMPURE_EXCEPTIONS.map((m) => m.path),
};
const IO_MODULES = [
  '^(node:)?(fs|fs/promises|net|tls|http|http2|https|dgram|dns|child_process|cluster|worker_threads|timers|timers/promises|readline|os|process|v8|vm)$',
  '^lmdb$',
  '^@nats-io/',
  '^@grpc/',
  '^pino',
];

module.exports = {
  forbidden: [
    {
      name: 'pure-imports-io',
      comment: 'Pure modules (lint/pure-modules.cjs) must not do I/O.',
      severity: 'error',
      from: PURE,
      to: { path: IO_MODULES },
    },
    {
      name: 'pure-imports-only-pure',
      comment:
        "A pure module's own imports are pure too (types aside): an index that re-exports I/O, " +
        'or a shell module, would bring its I/O in.',
      severity: 'error',
      from: PURE,
      to: {
        path: '^(src|replay)/',
        pathNot: PURE.path,
        dependencyTypesNot: ['type-only'],
      },
    },
    {
      name: 'pure-imports-io-by-path',
      comment: 'Pure modules must not import the I/O parts of the events layer.',
      severity: 'error',
      from: PURE,
      to: { path: '^src/events/(log/|lmdb/|jsonl/|jetstream/|open/|archive/|index\\.ts$)' },
    },
    {
      name: 'events-are-the-bottom',
      comment: 'src/events depends on nothing of readie but src/shared.',
      severity: 'error',
      from: { path: '^src/events/' },
      to: { path: '^src/(projections|core|router|worker|client|cli|cluster)/|^replay/' },
    },
    {
      name: 'projections-above-events-only',
      severity: 'error',
      from: { path: '^src/projections/' },
      to: { path: '^src/(core|router|worker|client|cli|cluster)/|^replay/' },
    },
    {
      name: 'core-below-the-shells',
      comment:
        'The core holds every decision of the router and replay: it sees events, projections and ' +
        'shared code, never a shell (router, worker, CLI, replay).',
      severity: 'error',
      from: { path: '^src/core/' },
      to: { path: '^src/(router|worker|client|cli|cluster)/|^replay/|^bin/' },
    },
    {
      name: 'placement-is-whole',
      comment:
        'Placement (both kinds of call: the seed rules and pinned versions) imports nothing of the ' +
        'core outside src/core/placement: a walk of one placement stays there. The pin table ' +
        '(src/core/pins) builds on placement, never the reverse.',
      severity: 'error',
      from: { path: '^src/core/placement/' },
      to: { path: '^src/core/(?!placement/)' },
    },
    {
      name: 'core-sees-proto-types-only',
      comment:
        'The core may use the wire messages as types (and call.proto and the google.rpc error ' +
        'details, which are plain messages), never the generated grpc-js service code.',
      severity: 'error',
      from: { path: '^src/core/' },
      to: {
        path: '^src/proto/gen/',
        pathNot: '^src/proto/gen/(readie/v1/call|google/.*)\\.ts$',
        dependencyTypesNot: ['type-only'],
      },
    },
    {
      name: 'worker-never-imports-router',
      comment: 'The worker shares only src/shared and the proto with the router (and its core).',
      severity: 'error',
      from: { path: '^src/worker/' },
      to: { path: '^src/(router|core)/|^replay/' },
    },
    {
      name: 'worker-core-below-the-worker-shell',
      comment:
        "The worker's core (src/worker/core) holds its policies and parsers: it sees the event " +
        'vocabulary, shared code, the generated messages and itself, never the worker shell ' +
        '(processes, cgroups, sockets), not even its types.',
      severity: 'error',
      from: { path: '^src/worker/core/' },
      to: {
        path: '^src/worker/(?!core/)|^src/(router|core|client|cli|cluster|net|host)/|^replay/|^bin/',
      },
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
        "src/client runs in users' programs: it may import the generated proto, src/shared and src/net, " +
        'never the router, the worker, the CLI, replay or the event log.',
      severity: 'error',
      from: { path: '^src/client/' },
      to: { path: '^src/(?!client/|proto/gen/|shared/|net/)|^replay/|^bin/' },
    },
    {
      name: 'net-is-a-leaf',
      comment:
        'src/net holds network diagnostics the clients, the router and the workers share: it ' +
        'imports nothing of readie but src/shared.',
      severity: 'error',
      from: { path: '^src/net/' },
      to: { path: '^src/(?!net/|shared/)|^replay/|^bin/' },
    },
    {
      name: 'host-is-a-leaf',
      comment:
        'src/host holds host I/O the router and the workers share (files of secrets): it ' +
        'imports nothing of readie but src/shared.',
      severity: 'error',
      from: { path: '^src/host/' },
      to: { path: '^src/(?!host/|shared/)|^replay/|^bin/' },
    },
    {
      name: 'replay-never-serves',
      comment: 'replay reads logs offline: events, projections and the core only, never gRPC.',
      severity: 'error',
      from: { path: '^replay/' },
      to: { path: '^src/(router|worker|client|proto|cli|cluster)/|^@grpc/' },
    },
    {
      name: 'local-cluster-runs-commands',
      comment: 'readie up starts the router and workers as processes; it never imports them.',
      severity: 'error',
      from: { path: '^src/cluster/' },
      to: { path: '^src/(router|worker|client|core)/|^replay/' },
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
