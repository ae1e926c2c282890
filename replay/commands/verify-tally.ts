/**
 * What `replay verify` counts while a replayer makes every decision of a log again: the calls
 * reproduced, those with no recorded outcome, the other decisions, and the first divergence.
 */
import type { CallResult } from '../engine/call-result.js';
import type { DecisionResult } from '../engine/append-check.js';
import { Replayer } from '../engine/replayer.js';

/** The counts of a verify (of a whole log, or of one range of it). */
export interface VerifyCounts {
  /** Calls whose recorded outcome was compared. */
  checked: number;
  /** Calls with no recorded outcome (decided, folded, not compared). */
  unrecorded: number;
  /** Other decisions of the core compared. */
  others: number;
  /** Failed dials of calls this replay never saw requested (folded, not decided again). */
  undecidedDials: number;
}

/** A divergence of a decision other than a call's, with the rules version the log was at. */
export interface OtherDivergence {
  readonly result: DecisionResult;
  readonly rulesVersion: number;
}

/** A replayer that counts what it verifies and keeps the first divergence. */
export class VerifyTally {
  readonly counts: VerifyCounts = { checked: 0, unrecorded: 0, others: 0, undecidedDials: 0 };
  divergence: CallResult | undefined;
  otherDivergence: OtherDivergence | undefined;
  readonly replayer: Replayer;

  constructor(rules: 'recorded' | 'current', startsInside = false) {
    this.replayer = new Replayer({
      rules,
      startsInside,
      onCall: (result) => {
        if (result.recorded === 'none') this.counts.unrecorded += 1;
        else this.counts.checked += 1;
        if (result.recorded === 'diverged' && !this.otherDivergence) this.divergence ??= result;
      },
      onDecision: (result) => {
        this.counts.others += 1;
        if (result.recorded === 'diverged' && !this.divergence) {
          this.otherDivergence ??= { result, rulesVersion: this.replayer.logRulesVersion };
        }
      },
    });
  }

  /** Whether a divergence was found (the verify stops there). */
  get found(): boolean {
    return this.divergence !== undefined || this.otherDivergence !== undefined;
  }

  /** Settles the last decision; the counts are then whole. */
  end(): void {
    if (!this.found) this.replayer.end();
    this.counts.undecidedDials = this.replayer.undecidedDials;
  }
}
