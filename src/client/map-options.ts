/** The options of a map (`map`, `starmap`) and the function it maps: shared by the fan-out and its engine. */
import type { CallDemandOptions } from './call-config.js';
import type { ModuleFunction, SourceFunction } from './json-call.js';
import type { RemoteLogLine } from './remote-call.js';

/** A Python function to map, without arguments (each input brings its own). */
export type MappedFunction = (ModuleFunction | SourceFunction) & {
  /** Keyword arguments passed to every call. */
  readonly kwargs?: Readonly<Record<string, unknown>>;
};

/** Options of a map: its calls' demand, and how the map runs. */
export interface MapOptions extends CallDemandOptions {
  /** Results in input order (default), or as they complete. */
  readonly orderOutputs?: boolean;
  /** Yield a failed input's error in its place instead of rejecting at the first failure. */
  readonly returnExceptions?: boolean;
  /** At most this many calls in flight (default: the tenant's usable slots, at most 256). */
  readonly maxConcurrency?: number;
  /** A fresh container for every input (default: one container per concurrency slot). */
  readonly isolateInputs?: boolean;
  /** A progress bar on stderr (default: when stderr is a terminal). */
  readonly progress?: boolean;
  /** Retry an input whose call ran and failed this many times (default 0). */
  readonly retries?: number;
  /** Aborting it cancels the calls in flight and ends the map with CallCancelledError. */
  readonly signal?: AbortSignal;
  /** Called with each log line of every call. */
  readonly onLog?: (line: RemoteLogLine) => void;
  /** Inputs per batch, 1 to 1,024 (default: sized by the inputs' measured time). */
  readonly chunkSize?: number;
  /**
   * How many inputs of a batch its container runs at once, 1 to 256 (default 1): threads for a
   * sync Python function, tasks for an `async def` one; for I/O-bound functions.
   */
  readonly maxInputs?: number;
}
