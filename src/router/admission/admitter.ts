/**
 * Admission's shell (docs/placement.md, "The admission queue"): after every recorded decision
 * the core says can open room (`mayAdmitAfter`: a call ending, a container removed or forgotten,
 * a worker registering or leaving, a load report that makes room, a session ending or expiring, a
 * pin or quota change, a call leaving the queue), while calls wait, it records the core's admission
 * decision again and again until it admits nothing, and hands each admitted call its placement.
 * Reads no clock and makes no rule: the order, the fit and when to ask are the core's.
 */
import { mayAdmitAfter } from '../../core/admission/index.js';
import { decide } from '../../core/decisions.js';
import type { Decision } from '../../core/decision.js';
import type { PlacementCaches } from '../../core/placement/index.js';
import type { ActiveCalls } from '../calls/active-calls.js';
import type { Journal } from '../journal/index.js';
import type { Logger } from '../observability/logger.js';

/** Most calls admitted in one turn of the event loop (then it yields, and goes on). */
const BATCH = 256;

/** What the admitter needs. */
export interface AdmitterOptions {
  readonly journal: Journal;
  readonly placement: PlacementCaches;
  readonly active: ActiveCalls;
  readonly logger: Logger;
}

/** Admits queued calls whenever capacity can have changed. */
export class Admitter {
  private scheduled = false;
  private stopped = false;

  constructor(private readonly options: AdmitterOptions) {
    options.journal.onRecorded((decision) => this.recorded(decision));
  }

  /** Stops admitting (the router stops). */
  stop(): void {
    this.stopped = true;
  }

  private recorded(decision: Decision): void {
    if (this.scheduled || this.options.journal.state.queue.size === 0) return;
    if (!mayAdmitAfter(decision)) return;
    this.scheduled = true;
    setImmediate(() => this.admit());
  }

  /** Admits calls until the core admits none (at most `BATCH` now, the rest next turn). */
  private admit(): void {
    this.scheduled = false;
    const { journal, placement, active, logger } = this.options;
    for (let admitted = 0; admitted < BATCH; admitted += 1) {
      if (this.stopped || journal.failed || journal.state.queue.size === 0) return;
      const decision = decide('admit', journal.state, { caches: placement });
      if (decision.requestId === null || decision.placement === null) return;
      try {
        journal.record(decision);
      } catch (error) {
        logger.error({ err: error }, 'could not record an admission');
        return;
      }
      const call = active.get(decision.requestId);
      if (call?.admitted(decision.placement) === true) continue;
      // Its client went before the call heard: give back what admission reserved.
      if (decision.placement.outcome === 'placed') {
        const ended = decide('end', journal.state, {
          requestId: decision.requestId,
          code: 'CANCELLED',
        });
        try {
          journal.record(ended);
        } catch (error) {
          logger.error({ err: error }, 'could not record the end of an admitted call');
          return;
        }
      }
    }
    this.scheduled = true;
    setImmediate(() => this.admit());
  }
}
