/**
 * Admission (docs/placement.md, "The admission queue"): a core decision the shell makes whenever
 * capacity can have changed. It offers a slot to the head of each tenant in fair order
 * (`fair-order.ts`) and admits the first that placement places: `CallAdmitted`, then placement's
 * events (`CallPlaced`, ...), one call per decision (the shell decides again until nothing is
 * admitted, each decision against the state the last one left). A head that does not fit now is
 * passed over for the next tenant's (no overtaking within a tenant: only heads are offered). A
 * head placement now refuses outright (its session expired, it never fits any more) is
 * admitted to that refusal: `CallAdmitted`, then `CallRejected`. Reads no clock.
 */
import type { ClusterState } from '../../projections/cluster-state.js';
import type { Config } from '../../shared/config.js';
import type { Decision } from '../decision.js';
import {
  place,
  type PlacementCaches,
  type PlacementDecision,
  type ScanMemo,
} from '../placement/index.js';
import { fairOrder } from './fair-order.js';
import { callOf, slotCapReached } from './queue-rules.js';

/** What admission is given besides the state. */
export interface AdmitInput {
  /** The config to decide under; default the config in force. */
  readonly config?: Config;
  /** The caller's placement caches for this state. */
  readonly caches?: PlacementCaches;
}

/** Admission's decision: the call admitted and its placement, or nothing. */
export interface AdmitDecision extends Decision {
  /** The call admitted; null when none was. */
  readonly requestId: string | null;
  /** Its placement (placed, or refused outright); null when none was admitted. */
  readonly placement: PlacementDecision | null;
}

/** Admits the first queued call, in fair order, that placement does not answer "not now". */
export function decideAdmit(state: ClusterState, input: AdmitInput = {}): AdmitDecision {
  if (state.queue.size > 0) {
    const config = input.config ?? state.config;
    // Heads of one budget walk the candidates once: the state does not change in between.
    const scans: ScanMemo = new Map();
    for (const turn of fairOrder(state)) {
      const { requestId } = turn.head;
      // A tenant at its slot cap waits (a queued call always needs a new slot: one reusing its
      // session's container never queues).
      if (slotCapReached(state, turn.head.tenantId) !== null) continue;
      const placement = place(state, callOf(state, turn.head), {
        config,
        caches: input.caches,
        scans,
        fitOnly: true,
      });
      if (placement.outcome === 'rejected' && placement.fit === 'not-now') continue;
      return {
        cause: { kind: 'admit', requestId },
        events: [{ type: 'CallAdmitted', requestId }, ...placement.events],
        requestId,
        placement,
      };
    }
  }
  return {
    cause: { kind: 'admit', requestId: 'none' },
    events: [],
    requestId: null,
    placement: null,
  };
}
