/** Placement: the router's pure, explainable decision. See docs/placement.md. */
export { budgetOf, callOfRequested, sessionIdOf, type Budget, type CallToPlace } from './call.js';
export { notCandidateReason } from './candidates.js';
export { cheapest, costTable, type CostRow } from './checkpoints.js';
export { explainPlacement, place, type PlaceOptions } from './place.js';
export type { ScanMemo } from './placing.js';
export { rejected } from './outcome.js';
export { CandidateIndex, type RankedCandidate, type RankedCandidates } from './candidate-index.js';
export { PlacementCaches } from './placement-caches.js';
export {
  ADMISSION_RULES_VERSION,
  decidesAdmission,
  IMAGE_COST_RULES_VERSION,
  IMAGE_RULES_VERSION,
  KEPT_RULES_VERSIONS,
  keepsRulesVersion,
  PLACEMENT_RULES_VERSION,
  recordedRulesVersion,
  rulesSteps,
  SESSION_PIN_ONCE_RULES_VERSION,
  type RulesSteps,
} from './rules-version.js';
export { MAX_SLOTS_PER_WORKER, usableSlots, workerSlots, type SlotCount } from './usable-slots.js';
export type {
  Fit,
  ForeignId,
  PlacedDecision,
  PlacementDecision,
  RejectedDecision,
} from './decision.js';
export type {
  CheckpointExplanation,
  FilterVerdict,
  PackagesExplanation,
  PlacementExplanation,
  ImageExplanation,
  SessionExplanation,
  WorkerExplanation,
  WorkerImageCost,
} from './explanation.js';
export { costText } from './image-cost-words.js';
export { Verdict, type Filter, type FilterStatus } from './filter.js';
export { FILTERS } from './filters/index.js';
export {
  checkPackages,
  normalizeDistribution,
  planPackages,
  RequirementCache,
} from './packages.js';
export { compareWorkers, RANK_TERMS, type RankKey } from './ranking/index.js';
export type { RankTerm } from './rank-term.js';
export { pinnedSubset, type PinnedSubset } from './pinned/pinned-subset.js';
export {
  compareScored,
  rankedByScore,
  rendezvousScore,
  rendezvousSubset,
  type ScoredWorker,
} from './pinned/rendezvous.js';
export {
  noPinMessage,
  ownResolution,
  resolvePinned,
  type Resolution,
  type ResolutionOutcome,
  type ResolutionSource,
} from './pinned/resolution.js';
export type { RoutingCandidate, RoutingExplanation } from './pinned/routing-explanation.js';
export { candidateIds, SubsetCache } from './pinned/subset-cache.js';
export {
  flavorsListing,
  versionFlavor,
  versionSpec,
  type VersionFlavor,
} from './pinned/version-flavor.js';
