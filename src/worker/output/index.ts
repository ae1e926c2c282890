/** Calls' output kept on the worker's disk, and the RPC that reads it back (docs/calls.md). */
export {
  CallOutputStore,
  OutputWriter,
  type KeptOutput,
  type OutputAbsence,
  type OutputBounds,
  type OutputLine,
  type OutputNews,
} from './output-store.js';
export { serveCallOutput, type CallOutputDeps } from './call-output.js';
