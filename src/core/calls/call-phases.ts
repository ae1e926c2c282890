/**
 * What the call's state machine (`call-machine.ts`) steps through: the call's phases, each carrying
 * what the call knows there; the inputs that step it; and the world a step reads.
 */
import type { ClusterState } from '../../projections/cluster-state.js';
import type { CallIds } from '../../proto/gen/readie/v1/call.js';
import type { CallConfig } from '../../proto/gen/readie/v1/proxy.js';
import type { CallTrailers } from '../../shared/call-trailers.js';
import type { Config } from '../../shared/config.js';
import type {
  CallToPlace,
  PlacedDecision,
  PlacementCaches,
  PlacementDecision,
} from '../placement/index.js';
import type { CallDecision, CallEnding } from './call-steps.js';
import type { DialFailureDecision } from './dial-failure.js';
import type { ClientMessage, WorkerAnswer } from './relay-messages.js';

/** What a call knows once its config arrived. */
export interface CallFacts {
  readonly config: CallConfig;
  /** The call as placement sees it: its IDs and its demand exactly as sent. */
  readonly call: CallToPlace;
  /** The client's deadline, epoch ms (Infinity when it set none). */
  readonly clientDeadline: number;
  /** How long it waited for its session's turn, ms (absent: it did not wait). */
  readonly turnWaitMs?: number;
}

/** Where a call is in its life, and what it knows there. */
export type CallPhase =
  | {
      readonly phase: 'awaiting-config';
      readonly clientDeadline: number;
      /** The tenant the caller's credential names (null without one). */
      readonly tenantId: string | null;
    }
  | { readonly phase: 'waiting-turn'; readonly facts: CallFacts }
  | {
      readonly phase: 'placing';
      readonly facts: CallFacts;
      /** The call's decision, or the decision after a failed dial (placed again, or refused). */
      readonly decision: CallDecision | DialFailureDecision;
    }
  | {
      /**
       * Waiting in the admission queue (docs/placement.md): the client is paused, so the router
       * reads no chunk of it; what arrived before the pause took hold is kept for the worker.
       */
      readonly phase: 'queued';
      readonly facts: CallFacts;
      /** Why it waits (placement's words when it was queued). */
      readonly why: string;
      readonly held: readonly ClientMessage[];
      readonly clientEnded: boolean;
    }
  | {
      /** Placed: connecting to the worker before anything of the call is sent. */
      readonly phase: 'dialing';
      readonly facts: CallFacts;
      readonly placed: PlacedDecision;
      readonly ids: CallIds;
      /** Client messages that arrived meanwhile, to send once the stream is open. */
      readonly held: readonly ClientMessage[];
      /** Whether the client half-closed meanwhile. */
      readonly clientEnded: boolean;
    }
  | {
      readonly phase: 'relaying';
      readonly facts: CallFacts;
      readonly placed: PlacedDecision;
      /** The IDs answers carry: the placed ones until the worker names its container. */
      readonly ids: CallIds;
      /** Whether an answer already named the container. */
      readonly bound: boolean;
      /** Whether this call's container became its session's pin. */
      readonly createdPin: boolean;
    }
  | { readonly phase: 'done' };

/** Something that happened to the call. */
export type CallInput =
  | { readonly type: 'client-message'; readonly message: ClientMessage }
  /** The client half-closed its stream: the payload is complete. */
  | { readonly type: 'client-ended' }
  /**
   * The client cancelled, or its deadline passed; or the router ended its stream for a bound it
   * broke (`ending`: what the call ends with, in the log too).
   */
  | { readonly type: 'client-gone'; readonly ending?: CallEnding }
  /** The session's turn: `waitedMs`, how long the call waited for it (0: at once). */
  | { readonly type: 'turn-granted'; readonly waitedMs?: number }
  | { readonly type: 'turn-refused'; readonly error: unknown }
  /** The call's decision (a `record-decision` effect) was appended. */
  | { readonly type: 'recorded' }
  | { readonly type: 'record-failed'; readonly error: unknown }
  /** The queued call was admitted (the shell recorded admission's decision): its placement. */
  | { readonly type: 'admitted'; readonly placement: PlacementDecision }
  /** The queued call waited `QUEUE_TIMEOUT`. */
  | { readonly type: 'queue-timeout' }
  /** The connection to the placed worker is up: the stream can open. */
  | { readonly type: 'worker-dialed' }
  /** The connection to the placed worker could not be made: what went wrong. */
  | { readonly type: 'dial-failed'; readonly error: string }
  /** The worker stream can take the client's next chunk. */
  | { readonly type: 'worker-drained' }
  | { readonly type: 'worker-answer'; readonly answer: WorkerAnswer }
  /**
   * The worker's final status (an OK one after every answer was delivered), with the readie
   * trailers it carried (src/shared/call-trailers.ts; `readie-not-started` also when the router
   * never reached the worker at all).
   */
  | {
      readonly type: 'worker-ended';
      readonly code: number;
      readonly details: string;
      readonly trailers: CallTrailers;
    }
  /** The router is shutting down (or its log failed). */
  | { readonly type: 'shutdown'; readonly reason: string };

/** The world a step reads: nothing it keeps, everything read now. */
export interface CallWorld {
  /** The router's state now. */
  readonly state: ClusterState;
  /** Placement's caches for that state. */
  readonly caches: PlacementCaches;
  /** Now, in epoch ms (the router's clock). */
  readonly now: number;
  /** The router's settings (`SESSION_WAIT_TIMEOUT`, `EXECUTION_TIMEOUT`, `PROBE_TIMEOUT`). */
  readonly settings: Config;
  /** Whether this router is handling another call with that request ID. */
  handling(requestId: string): boolean;
}
