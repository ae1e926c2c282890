/**
 * The version of the placement rules. The router records it in `RouterStarted`, so a log says
 * which rules made its decisions, and `replay verify` decides a log by the rules it was recorded
 * under (the released versions' differing steps are kept: src/projections/rules-steps.ts). Raise
 * it with every change that can make a recorded decision come out otherwise, keep the old branch
 * under the old version, and say what changed in docs/placement.md ("Rules versions").
 */
import { recordedRulesVersion } from '../../projections/rules-steps.js';

export {
  IMAGE_COST_RULES_VERSION,
  IMAGE_RULES_VERSION,
  KEPT_RULES_VERSIONS,
  keepsRulesVersion,
  PLACEMENT_RULES_VERSION,
  recordedRulesVersion,
  rulesSteps,
  SESSION_PIN_ONCE_RULES_VERSION,
  type RulesSteps,
} from '../../projections/rules-steps.js';

/**
 * The first rules version that tells a call that never fits from one that does not fit now
 * (docs/placement.md, "Never fits and not now"). A log recorded under an earlier version (or
 * none) is decided as it was: every call that finds no room is refused with the words it had.
 */
export const ADMISSION_RULES_VERSION = 5;

/** Whether a log recorded under `recorded` rules tells "never fits" from "not now". */
export function decidesAdmission(recorded: number | null): boolean {
  return recordedRulesVersion(recorded) >= ADMISSION_RULES_VERSION;
}
