/** Placement: the router's pure, explainable decision. See docs/placement.md. */
export { budgetOf, sessionIdOf, type Budget, type CallToPlace } from './call.js';
export { notCandidateReason } from './candidates.js';
export { cheapest, costTable, type CostRow } from './checkpoints.js';
export { explainPlacement, place, type PlaceOptions } from './decide.js';
export { CandidateIndex, type RankedCandidate } from './candidate-index.js';
export { PlacementCaches } from './placement-caches.js';
export {
  KEPT_RULES_VERSIONS,
  keepsRulesVersion,
  PLACEMENT_RULES_VERSION,
  recordedRulesVersion,
  rulesSteps,
  type RulesSteps,
} from './rules-version.js';
export { MAX_SLOTS_PER_WORKER, usableSlots, workerSlots, type SlotCount } from './usable-slots.js';
export type { ForeignId, PlacedDecision, PlacementDecision, RejectedDecision } from './decision.js';
export type {
  CheckpointExplanation,
  FilterVerdict,
  PackagesExplanation,
  PlacementExplanation,
  SessionExplanation,
  WorkerExplanation,
} from './explanation.js';
export { Verdict, type Filter } from './filter.js';
export { FILTERS } from './filters/index.js';
export {
  checkPackages,
  normalizeDistribution,
  planPackages,
  RequirementCache,
} from './packages.js';
export { compareWorkers, RANK_TERMS, type RankKey } from './ranking/index.js';
export type { RankTerm } from './rank-term.js';
