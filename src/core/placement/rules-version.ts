/**
 * The version of the placement rules. The router records it in `RouterStarted`, so a log says
 * which rules made its decisions, and `replay verify` decides a log by the rules it was recorded
 * under (the released versions' differing steps are kept: src/projections/rules-steps.ts). Raise
 * it with every change that can make a recorded decision come out otherwise, keep the old branch
 * under the old version, and say what changed in docs/placement.md ("Rules versions").
 */
export {
  KEPT_RULES_VERSIONS,
  keepsRulesVersion,
  PLACEMENT_RULES_VERSION,
  recordedRulesVersion,
  rulesSteps,
  type RulesSteps,
} from '../../projections/rules-steps.js';
