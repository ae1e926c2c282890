/**
 * The one shape of every decision the core makes: the state before and one input in, the events
 * to append out, with the cause they record (a request, a report, a probe, a timer). The shell's
 * only way to change the state is to append a decision (`Journal.record`), so every append says
 * what caused it, and replay groups events by cause (docs/replay.md).
 */
import type { Cause } from '../events/cause.js';
import type { NewEvent } from '../events/types.js';
import type { ClusterState } from '../projections/cluster-state.js';

/** What a decision appends, in one append: its events (cause first, consequences after). */
export interface Decision {
  /** What caused the append; every one of its events records it as text (`causeText`). */
  readonly cause: Cause;
  /** The events to append, in order; empty when the input changes nothing (nothing is appended). */
  readonly events: readonly NewEvent[];
}

/** A decision: a pure function of the state before and one input. */
export type Decide<Input, Made extends Decision = Decision> = (
  state: ClusterState,
  input: Input,
) => Made;
