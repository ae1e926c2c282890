/**
 * Every decision of the core, by what triggers it: the one table the shells decide through (the
 * router, the call machine, replay and the scenario recorder call `decide`), so a decision is
 * listed here or made nowhere (test/core/decisions.test.ts finds every function of the core that
 * returns a `Decision` and checks it is here, and that nothing outside this file calls one
 * directly). Each has the shape of `Decide` (the compiler checks it here): the state before and one
 * input in, a `Decision` out, which the shell records as it is (`Journal.record`).
 */
import type { ClusterState } from '../projections/cluster-state.js';
import { decideAdmit, decideLeaveQueue } from './admission/index.js';
import { decideBound, decideCall, decideCallEnd } from './calls/call-steps.js';
import { decideDialFailure } from './calls/dial-failure.js';
import type { Decide } from './decision.js';
import { decideProbeFailure, decideProbeSuccess } from './liveness/probe-outcome.js';
import { decideReap } from './liveness/reaper.js';
import {
  decideContainerReport,
  decideStatusReport,
  decideUtilizationReport,
} from './registry/report-events.js';
import {
  decideFlip,
  decideRemove,
  decideRollback,
  decideSetK,
  decideStage,
} from './pins/pin-changes.js';
import { decideProtection } from './pins/protection.js';
import { decideQuotaRemove, decideQuotaSet } from './quotas/quota-changes.js';
import { decideResidencyReport } from './pins/residency-report.js';
import { decideHeldImagesReport } from './registry/held-images-report.js';
import { decideImageReport } from './registry/image-report.js';
import { decideArchiveRecord } from './retention/archive-record.js';
import { decideSessionEnd } from './sessions/session-end.js';
import { decideTurnRefusal } from './sessions/turn-refusal.js';
import { decideStart } from './startup/startup-events.js';

/** The core's decisions, by trigger (the cause each records is in its own module). */
export const DECISIONS = {
  /** The router starts over its log (`start`). */
  start: decideStart,
  /** A call has its turn: its request and placement (`call:REQUEST`). */
  call: decideCall,
  /** Capacity can have changed: the next queued call in fair order is admitted (`admit:REQUEST`). */
  admit: decideAdmit,
  /** A queued call leaves the queue unplaced: deadline, cancel, timeout (`leave:REQUEST`). */
  leaveQueue: decideLeaveQueue,
  /** A call's first answer names its container (`answer:REQUEST`). */
  answer: decideBound,
  /** A placed call's stream could not be opened: placed again or refused (`dial:REQUEST`). */
  dialFailure: decideDialFailure,
  /** A call ended (`end:REQUEST`). */
  end: decideCallEnd,
  /** A worker's status report: registration, leaving (`report:WORKER`). */
  statusReport: decideStatusReport,
  /** A worker's load report (`report:WORKER`). */
  utilizationReport: decideUtilizationReport,
  /** A worker's report of one container (`report:WORKER`). */
  containerReport: decideContainerReport,
  /** A worker's report of its versions and resident budget (`report:WORKER`). */
  residencyReport: decideResidencyReport,
  /** A worker's report of a tenant's image: built, failed, removed (`report:WORKER`). */
  imageReport: decideImageReport,
  /** A worker's report of every image it holds, after its status report (`report:WORKER`). */
  heldImagesReport: decideHeldImagesReport,
  /** A health probe failed (`probe:WORKER`). */
  probeFailure: decideProbeFailure,
  /** A health probe answered after failures (`probe:WORKER`). */
  probeSuccess: decideProbeSuccess,
  /** A reaper pass (`reaper`). */
  reaper: decideReap,
  /** A session call's wait for its turn ran out: "session is busy" (`call:REQUEST`). */
  turnRefusal: decideTurnRefusal,
  /** A client ends its session (`session:SESSION`). */
  sessionEnd: decideSessionEnd,
  /** `readie pin stage` (`admin:TENANT`). */
  stage: decideStage,
  /** `readie pin flip` (`admin:TENANT`). */
  flip: decideFlip,
  /** `readie pin rollback` (`admin:TENANT`). */
  rollback: decideRollback,
  /** `readie pin set-k` (`admin:TENANT`). */
  setK: decideSetK,
  /** `readie pin remove` (`admin:TENANT`). */
  remove: decideRemove,
  /** `readie quota set` (`admin:TENANT`). */
  quotaSet: decideQuotaSet,
  /** `readie quota remove` (`admin:TENANT`). */
  quotaRemove: decideQuotaRemove,
  /** What every worker must keep, after the table or the fleet changed (`routing`). */
  protection: decideProtection,
  /** A segment of the log moved to the archive, or an archive file expired (`archive`). */
  archive: decideArchiveRecord,
} as const satisfies Record<string, Decide<never>>;

/** What triggers a decision: a key of `DECISIONS`. */
export type Trigger = keyof typeof DECISIONS;

/** What the decision of `T` is given besides the state. */
export type InputOf<T extends Trigger> = Parameters<(typeof DECISIONS)[T]>[1];

/** What the decision of `T` returns: a `Decision` and what else its shell needs of it. */
export type DecisionOf<T extends Trigger> = ReturnType<(typeof DECISIONS)[T]>;

/** The decision `trigger` makes of `input` against `state`. */
export function decide<T extends Trigger>(
  trigger: T,
  state: ClusterState,
  input: InputOf<T>,
): DecisionOf<T> {
  const decision = DECISIONS[trigger] as Decide<InputOf<T>, DecisionOf<T>>;
  return decision(state, input);
}
