/**
 * A queued call leaves the queue unplaced (docs/placement.md, "The admission queue"): its
 * client's deadline passed, its client went, it waited `QUEUE_TIMEOUT`, or the router restarted.
 * One `CallLeftQueue` with the code and words the client is answered with.
 */
import type { QueueLeaveReason } from '../../events/schema.js';
import type { ClusterState } from '../../projections/cluster-state.js';
import type { GrpcCodeName } from '../../shared/grpc-codes.js';
import { formatDuration } from '../../shared/units.js';
import type { Decision } from '../decision.js';

/** Why and how a queued call leaves. */
export interface LeaveInput {
  readonly requestId: string;
  readonly reason: QueueLeaveReason;
  readonly code: GrpcCodeName;
  readonly message: string;
}

/** `CallLeftQueue` for a call still queued; nothing for one that is not (admitted, or gone). */
export function decideLeaveQueue(state: ClusterState, input: LeaveInput): Decision {
  const { requestId, reason, code, message } = input;
  return {
    cause: { kind: 'leave', requestId },
    events: state.queue.has(requestId)
      ? [{ type: 'CallLeftQueue', requestId, reason, code, message }]
      : [],
  };
}

/** The words of a call that waited `timeoutMs` in the queue: why it did not fit, as queued. */
export function queueTimeoutMessage(timeoutMs: number, why: string): string {
  return `queued for ${formatDuration(timeoutMs)}: ${why} (QUEUE_TIMEOUT)`;
}
