/**
 * The version of the placement rules. The router records it in `RouterStarted`, so a log says
 * which rules made its decisions, and `replay verify` can tell a divergence caused by a change of
 * the rules (a log recorded under another version) from an incident (the same rules deciding
 * otherwise). Raise it with every change that can make a recorded decision come out otherwise,
 * and say what changed in docs/placement.md ("Rules versions").
 */

/** The placement rules this code decides by. */
export const PLACEMENT_RULES_VERSION = 5;

/**
 * The first rules version that tells a call that never fits from one that does not fit now
 * (docs/placement.md, "Never fits and not now"). A log recorded under an earlier version (or
 * none) is decided as it was: every call that finds no room is refused with the words it had.
 */
export const ADMISSION_RULES_VERSION = 5;

/**
 * The rules version a log's decisions were made under: the one its last `RouterStarted` recorded;
 * a log from before routers recorded it was decided by the first versioned rules, version 1.
 */
export function recordedRulesVersion(recorded: number | null): number {
  return recorded ?? 1;
}

/** Whether a log recorded under `recorded` rules tells "never fits" from "not now". */
export function decidesAdmission(recorded: number | null): boolean {
  return recordedRulesVersion(recorded) >= ADMISSION_RULES_VERSION;
}
