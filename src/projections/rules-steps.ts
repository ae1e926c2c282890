/**
 * The steps in which the released placement rules versions differ (docs/placement.md, "Rules
 * versions"), kept so that a log replays by the rules it was recorded under: every decision and
 * fold reads the version in force (`ClusterState.rulesVersion`, from the log's last
 * `RouterStarted`) and takes the branch that version took, as a workflow engine keeps the patched
 * branches of its code. The live router records today's version, so it always takes today's
 * branches. The fold's own steps (forgetting, residency) live here, beside the fold; placement's
 * read the same table. A new version adds its row and its fixtures.
 */

/**
 * The first rules version under which placement prefers a worker that already holds the call's
 * image (docs/placement.md, "Images"). Its one definition: the gate, today's version and the kept
 * list below all read it, so renumbering it (when versions are merged) is a change of this line.
 */
export const IMAGE_RULES_VERSION = 8;

/**
 * The first rules version under which a pinned call that finds no room on its subset waits in the
 * admission queue (docs/tenant-routing.md, "When the subset has no room").
 */
export const PINNED_QUEUE_RULES_VERSION = 9;

/**
 * The first rules version under which a call naming an image goes to the worker of lowest image
 * cost: its flavor's cheapest checkpoint for the call's imports, plus the image's build cost where
 * the worker does not hold it (docs/placement.md, "Images").
 */
export const IMAGE_COST_RULES_VERSION = 10;

/**
 * The first rules version under which a session call placed in the container its session is
 * already pinned to appends no `SessionPinned` that would change nothing (docs/placement.md,
 * "Rules versions").
 */
export const SESSION_PIN_ONCE_RULES_VERSION = 11;

/** The placement rules this code decides by (today's). */
export const PLACEMENT_RULES_VERSION = SESSION_PIN_ONCE_RULES_VERSION;

/**
 * The versions this code can decide by, each as released. Version 1's steps (container-count,
 * session checkpoints and failed dials as they were before 2) are not kept: a log recorded under
 * it replays by today's rules (but for the steps that read the recorded version, 7's and 11's),
 * and a divergence in it is reported as a change of the rules.
 */
export const KEPT_RULES_VERSIONS: readonly number[] = [
  2,
  3,
  4,
  5,
  6,
  7,
  IMAGE_RULES_VERSION,
  PINNED_QUEUE_RULES_VERSION,
  IMAGE_COST_RULES_VERSION,
  SESSION_PIN_ONCE_RULES_VERSION,
];

/**
 * The rules version a log's decisions were made under: the one its last `RouterStarted` recorded;
 * a log from before routers recorded it was decided by the first versioned rules, version 1.
 */
export function recordedRulesVersion(recorded: number | null): number {
  return recorded ?? 1;
}

/** Whether this code keeps `version`'s rules (so a divergence under them is an incident). */
export function keepsRulesVersion(version: number): boolean {
  return KEPT_RULES_VERSIONS.includes(version);
}

/** What the rules in force do, step by step, for the version a state records. */
export interface RulesSteps {
  readonly version: number;
  /**
   * 3 on: a status report from the same worker process keeps its residency (under 2 every
   * registration forgot it).
   */
  readonly sameProcessKeepsResidency: boolean;
  /**
   * 4 on: sessions and request IDs have owners (another tenant's is refused NOT_FOUND /
   * ALREADY_EXISTS before anything else); under 3 an unpinned call was placed in another tenant's
   * session, a pinned one refused PERMISSION_DENIED, and a reused request ID taken over.
   */
  readonly owners: boolean;
  /**
   * 4 on: ended sessions are forgotten SESSION_RETENTION after they ended, and tenant calls
   * PIN_RETENTION after they were requested, as of any event; under 3 sessions were never
   * forgotten and tenant calls only as of the next tenant's call.
   */
  readonly forgetsAsOfAnyEvent: boolean;
  /**
   * 6 on: a pinned call whose version must be cold-loaded is shed when the load would not finish
   * inside the deadline its `CallRequested` records (`deadlineMs`); under 5 the load started
   * whatever the deadline.
   */
  readonly shedsLoadsPastDeadline: boolean;
  /**
   * 7 on: a container made or used for a session's call holds its slot until its worker reports
   * it gone (`removed`, `error`), whatever the session or the router's record of it says
   * (`WorkerRecord.sessionContainers`); under 6 it held none once its session ended while the
   * record still said `busy`, or once its call ended before the worker reported it at all, and a
   * call placed into that slot was refused by the worker for its container limit. It reads the
   * version the log recorded (as the words of 5 do): a log that recorded none counts as it was
   * recorded.
   */
  readonly sessionContainersHoldSlots: boolean;
  /**
   * 8 on: a call naming an image (`CallRequested.imageKey`) goes to the best-ranked worker that
   * holds that image and passes every filter, before any other; under 7 and earlier images did
   * not count.
   */
  readonly prefersImageHolders: boolean;
  /**
   * 9 on (`PINNED_QUEUE_RULES_VERSION`): with the queue in force, a pinned call no member of its
   * version's subset can take now waits in the admission queue (and is admitted on its subset
   * only, by the version it was queued under, its deadline checked against a cold load as at its
   * request), and one no member could take even empty is refused as never fitting; under 8 and earlier both
   * were shed with the retry-after hint.
   */
  readonly queuesPinnedCalls: boolean;
  /**
   * 10 on (`IMAGE_COST_RULES_VERSION`): a call naming an image goes to the filter-passing worker
   * of lowest image cost, `cover(flavor) + (holds the image ? 0 : build cost)`, ties to the
   * ranking; under 8 and 9 to the best-ranked holder, else the ranking's choice.
   */
  readonly costsImages: boolean;
  /**
   * 11 on (`SESSION_PIN_ONCE_RULES_VERSION`): a session call placed in the container its session
   * is pinned to appends `SessionPinned` only when it changes the pin (its checkpoint, learned
   * since); under 10 and earlier every such call appended one, which the fold passed over. It
   * reads the version the log recorded (as 7's step does): a log that recorded none (whose every
   * reuse re-pinned) counts as it was recorded.
   */
  readonly pinsSessionOnce: boolean;
}

/** The steps of the rules a log recorded as `recordedVersion` (see `rulesSteps`). */
function stepsOf(recordedVersion: number): RulesSteps {
  const version = keepsRulesVersion(recordedVersion) ? recordedVersion : PLACEMENT_RULES_VERSION;
  return Object.freeze({
    version,
    sameProcessKeepsResidency: version >= 3,
    owners: version >= 4,
    forgetsAsOfAnyEvent: version >= 4,
    shedsLoadsPastDeadline: version >= 6,
    sessionContainersHoldSlots: recordedVersion >= 7,
    prefersImageHolders: version >= IMAGE_RULES_VERSION,
    queuesPinnedCalls: version >= PINNED_QUEUE_RULES_VERSION,
    costsImages: version >= IMAGE_COST_RULES_VERSION,
    pinsSessionOnce: recordedVersion >= SESSION_PIN_ONCE_RULES_VERSION,
  });
}

/**
 * The steps of every version up to today's, by recorded version, made once: placement reads them
 * for every call and the fold for every event.
 */
const STEPS_BY_VERSION: readonly RulesSteps[] = Array.from(
  { length: PLACEMENT_RULES_VERSION + 1 },
  (_, recordedVersion) => stepsOf(recordedVersion),
);

/**
 * The steps of the rules `state` records. A version this code does not keep (1, or one newer than
 * it) takes today's steps.
 */
export function rulesSteps(recorded: number | null): RulesSteps {
  const recordedVersion = recordedRulesVersion(recorded);
  return STEPS_BY_VERSION[recordedVersion] ?? stepsOf(recordedVersion);
}
