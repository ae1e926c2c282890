/** What replay reports for each call: the decision placement makes now, and the recorded one. */
import type { PlacementDecision } from '../../src/core/placement/index.js';

/** Whether the log recorded the call's outcome, and whether placement reproduces it. */
export type RecordedStatus = 'none' | 'match' | 'diverged';

/** One call of a replayed log. */
export interface CallResult {
  /** The seq of its `CallRequested`. */
  readonly seq: number;
  /** When it was requested (the `at` of its `CallRequested`, or of the failed dial it follows). */
  readonly at: string;
  readonly requestId: string;
  readonly sessionId: string | null;
  /** The tenant its credential named; null without one. */
  readonly tenantId: string | null;
  /** What placement decides now. */
  readonly decision: PlacementDecision;
  /**
   * Why the call waits in the admission queue when it is queued now (its `CallQueued`; the
   * decision is then placement's refusal the queue stands in for), else null.
   */
  readonly queued: string | null;
  readonly recorded: RecordedStatus;
  /** The recorded decision events (without seq and at), when the log has them. */
  readonly recordedEvents: readonly Record<string, unknown>[] | null;
  /** The first difference, in words, when `recorded` is `diverged`. */
  readonly divergence: string | null;
  /** The placement rules' version the log's decision was made under (see `rules-version.ts`). */
  readonly rulesVersion: number;
}

/** The line `replay run --json` prints for a call (fields that do not apply are null). */
export interface CallLine {
  readonly seq: number;
  /** When it was requested. */
  readonly at: string;
  readonly requestId: string;
  /** Its tenant; null without one. */
  readonly tenantId: string | null;
  /** `queued`: it waits in the admission queue (`message` says why; its admission is a later line). */
  readonly outcome: CallOutcome;
  readonly workerId: string | null;
  readonly containerId: string | null;
  readonly checkpointId: string | null;
  readonly packages: readonly string[] | null;
  readonly skippedPackages: readonly string[] | null;
  readonly code: string | null;
  readonly message: string | null;
  /** A pinned call's version (placed: the one serving it; refused: the one resolved), else null. */
  readonly version: string | null;
  /** The routing revision of that resolution, else null. */
  readonly routingRevision: number | null;
  /** Placed: whether the worker loads the version first (false for any other call); else null. */
  readonly coldLoad: boolean | null;
  /** A shed's retry-after hint in ms, else null. */
  readonly retryAfterMs: number | null;
  readonly recorded: RecordedStatus;
}

/** What became of a call at its decision. */
export type CallOutcome = 'placed' | 'queued' | 'rejected';

/** A call result's outcome: placed, queued (placement's refusal with the queue on) or rejected. */
export function outcomeOf(result: CallResult): CallOutcome {
  return result.queued !== null ? 'queued' : result.decision.outcome;
}

/** The `--json` line of a call result. */
export function callLine(result: CallResult): CallLine {
  const { decision } = result;
  // A queued call's placement (a worker its tenant's cap kept it from) is not where it runs.
  const queued = result.queued !== null;
  const placed = decision.outcome === 'placed' && !queued ? decision : null;
  const rejected = decision.outcome === 'rejected' && !queued ? decision : null;
  return {
    seq: result.seq,
    at: result.at,
    requestId: result.requestId,
    tenantId: result.tenantId,
    outcome: outcomeOf(result),
    workerId: placed?.workerId ?? null,
    containerId: placed?.containerId ?? null,
    checkpointId: placed?.checkpointId ?? null,
    packages: placed?.packages ?? null,
    skippedPackages: placed?.skippedPackages ?? null,
    code: rejected?.code ?? null,
    message: rejected?.message ?? result.queued,
    version: decision.version,
    routingRevision: decision.routingRevision,
    coldLoad: placed?.coldLoad ?? null,
    retryAfterMs: rejected?.retryAfterMs ?? null,
    recorded: result.recorded,
  };
}
