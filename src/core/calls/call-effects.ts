/** What the call's state machine (`call-machine.ts`) asks its shell to do, in order. */
import type { QueueLeaveReason } from '../../events/schema.js';
import type { CallIds } from '../../proto/gen/readie/v1/call.js';
import type { CallHeader } from '../../proto/gen/readie/v1/execution.js';
import type { GrpcCodeName } from '../../shared/grpc-codes.js';
import type { Raised } from '../../shared/raised.js';
import type { Decision } from '../decision.js';
import type { CallToPlace, ForeignId, PlacedDecision } from '../placement/index.js';
import type { TrailerEntry } from './answer-trailers.js';
import type { CallDecision } from './call-steps.js';
import type { DialFailureDecision } from './dial-failure.js';
import type { ClientAnswer } from './relay-messages.js';

/** Something the shell must do, in order. */
export type CallEffect =
  | { readonly type: 'pause-client' }
  | { readonly type: 'resume-client' }
  /** The call's IDs are known (what its log lines carry from here on). */
  | { readonly type: 'identified'; readonly requestId: string; readonly sessionId: string | null }
  /** The call is being handled under its request ID (for duplicates, metrics, shutdown). */
  | { readonly type: 'register'; readonly requestId: string }
  | { readonly type: 'unregister'; readonly requestId: string }
  /** Wait for the session's turn in the line of the caller's tenant (`session-turns.ts`). */
  | {
      readonly type: 'wait-turn';
      readonly sessionId: string;
      readonly tenantId: string | null;
      readonly timeoutMs: number;
    }
  /** Stop waiting for the turn (the wait ends with a refusal the machine ignores). */
  | { readonly type: 'leave-line' }
  /** Release the session's turn if the call holds it (harmless otherwise). */
  | { readonly type: 'release-turn' }
  /** Explain the placement about to be decided, if anyone listens (debug logs). */
  | { readonly type: 'explain'; readonly call: CallToPlace }
  /** Append the call's decision; answer `recorded` or `record-failed`. */
  | { readonly type: 'record-decision'; readonly decision: CallDecision | DialFailureDecision }
  /**
   * The call waits in the admission queue: answer `admitted` when admission admits it (by its
   * request ID), `queue-timeout` after `timeoutMs`.
   */
  | {
      readonly type: 'queued';
      readonly requestId: string;
      readonly timeoutMs: number;
      readonly why: string;
    }
  /** The call left the queue (admitted, or why not): stop its `queue-timeout`. */
  | { readonly type: 'unqueued'; readonly outcome: 'admitted' | QueueLeaveReason }
  /** Append a decision; a failure is only reported (`failure` says what was not recorded). */
  | { readonly type: 'record'; readonly decision: Decision; readonly failure: string }
  /**
   * Connect to the placed worker (nothing of the call is sent yet), within `timeoutMs`; answer
   * `worker-dialed`, or `dial-failed` with what went wrong.
   */
  | {
      readonly type: 'dial-worker';
      readonly workerId: string;
      readonly address: string;
      readonly timeoutMs: number;
    }
  | {
      readonly type: 'open-worker';
      readonly workerId: string;
      readonly address: string;
      /** Epoch ms. */
      readonly deadline: number;
      readonly header: CallHeader;
    }
  | { readonly type: 'send-chunk'; readonly wire: Buffer; readonly bytes: number }
  | { readonly type: 'half-close-worker' }
  | { readonly type: 'cancel-worker' }
  | { readonly type: 'to-client'; readonly answer: ClientAnswer }
  /** End the client's stream with OK, once the last record committed when `afterCommit`. */
  | {
      readonly type: 'end-client';
      readonly afterCommit: boolean;
      /** The trailing metadata (`answer-trailers.ts`). */
      readonly trailers: readonly TrailerEntry[];
    }
  /**
   * End the client's stream with an error status and these trailers: the IDs, a pinned call's
   * version and revision, a shed's hint, `readie-not-started` on every refusal before the user's
   * function started, and what the worker said, relayed.
   */
  | {
      readonly type: 'fail-client';
      readonly code: GrpcCodeName;
      readonly details: string;
      readonly trailers: readonly TrailerEntry[];
    }
  // What happened, for logs and metrics.
  | { readonly type: 'placed'; readonly placed: PlacedDecision }
  /** The placed worker could not be reached; `attempts` so far (the decision says what next). */
  | {
      readonly type: 'dial-failed';
      readonly workerId: string;
      readonly error: string;
      readonly attempts: number;
    }
  | {
      readonly type: 'bound';
      readonly ids: CallIds;
      readonly createdPin: boolean;
      /** The container placement reused, when the worker ran the call in another one. */
      readonly expected: string | null;
    }
  | { readonly type: 'malformed'; readonly problem: string }
  | {
      readonly type: 'finished';
      readonly code: GrpcCodeName | null;
      readonly details: string;
      /** What the function raised (an OK call's), as its worker reported; null: nothing. */
      readonly raised: Raised | null;
      readonly ids: CallIds;
      readonly createdPin: boolean;
      readonly placed: PlacedDecision;
    }
  | {
      readonly type: 'refused';
      readonly error: unknown;
      readonly code: GrpcCodeName;
      readonly details: string;
      /** Whether it was waiting for its session's turn. */
      readonly waited: boolean;
      /** Set when placement refused it for naming another tenant's ID (for the log only). */
      readonly foreign?: ForeignId;
    };
