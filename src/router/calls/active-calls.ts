/** The calls this router is handling, by request ID: duplicate detection, metrics, shutdown. */
import type { PlacementDecision } from '../../core/placement/index.js';

/** One call as the registry of active calls sees it. */
export interface ActiveCall {
  /** True once the call is placed (a reservation exists) and until it finishes. */
  readonly placed: boolean;
  /** Ends the call now with `UNAVAILABLE` (the router is shutting down). */
  shutDown(reason: string): void;
  /**
   * The call waited in the admission queue and was admitted (the admission is recorded):
   * its placement. False when the call no longer waits for it (it left the queue meanwhile).
   */
  admitted(placement: PlacementDecision): boolean;
}

/** Calls from their config until they end. */
export class ActiveCalls {
  private readonly calls = new Map<string, ActiveCall>();

  /** Whether a call with this request ID is being handled. */
  has(requestId: string): boolean {
    return this.calls.has(requestId);
  }

  /** The call handled under this request ID, if any. */
  get(requestId: string): ActiveCall | undefined {
    return this.calls.get(requestId);
  }

  /** Records a call under its request ID. */
  add(requestId: string, call: ActiveCall): void {
    this.calls.set(requestId, call);
  }

  /** Forgets a call (only if it is the one recorded under that ID). */
  delete(requestId: string, call: ActiveCall): void {
    if (this.calls.get(requestId) === call) this.calls.delete(requestId);
  }

  /** Calls placed and not yet finished. */
  get inFlight(): number {
    let count = 0;
    for (const call of this.calls.values()) if (call.placed) count += 1;
    return count;
  }

  /** Calls being handled (waiting for a turn or running). */
  get size(): number {
    return this.calls.size;
  }

  /** Ends every call with `UNAVAILABLE`. */
  shutDownAll(reason: string): void {
    for (const call of [...this.calls.values()]) call.shutDown(reason);
  }
}
