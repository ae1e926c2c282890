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
  readonly outcome: 'placed' | 'rejected';
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

/** The `--json` line of a call result. */
export function callLine(result: CallResult): CallLine {
  const { decision } = result;
  const placed = decision.outcome === 'placed' ? decision : null;
  const rejected = decision.outcome === 'rejected' ? decision : null;
  return {
    seq: result.seq,
    at: result.at,
    requestId: result.requestId,
    tenantId: result.tenantId,
    outcome: decision.outcome,
    workerId: placed?.workerId ?? null,
    containerId: placed?.containerId ?? null,
    checkpointId: placed?.checkpointId ?? null,
    packages: placed?.packages ?? null,
    skippedPackages: placed?.skippedPackages ?? null,
    code: rejected?.code ?? null,
    message: rejected?.message ?? null,
    version: decision.version,
    routingRevision: decision.routingRevision,
    coldLoad: placed?.coldLoad ?? null,
    retryAfterMs: rejected?.retryAfterMs ?? null,
    recorded: result.recorded,
  };
}
