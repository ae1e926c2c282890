/**
 * Why placement decided what it did: per worker, candidacy, each filter's verdict and reason, the
 * ranking key; the session's part; the checkpoint cost table; the packages dropped. Built only
 * when asked for (`explainPlacement`), never on the hot path.
 */
import type { WorkerRecord } from '../../projections/cluster-state.js';
import { compareText } from '../../projections/queries.js';
import type { Config } from '../../shared/config.js';
import type { RoutingExplainSink, RoutingExplanation } from './pinned/routing-explanation.js';
import type { Budget } from './call.js';
import type { CostRow } from './checkpoints.js';
import type { PlacementDecision } from './decision.js';
import { verdictName } from './filter.js';
import type { ExplainedVerdict } from './filters/index.js';
import { rankKey, type RankKey } from './ranking/index.js';

/** One filter's verdict on one worker. */
export interface FilterVerdict {
  readonly filter: string;
  readonly verdict: 'pass' | 'fail' | 'skip';
  readonly reason: string;
}

/** Everything placement considered about one worker. */
export interface WorkerExplanation {
  readonly workerId: string;
  readonly status: WorkerRecord['status'];
  readonly flavor: WorkerRecord['flavor'];
  /** Why it was not a candidate; null when it was. */
  readonly notCandidate: string | null;
  readonly filters: readonly FilterVerdict[];
  /** Whether every filter passed. */
  readonly eligible: boolean;
  /** The ranking key, for eligible workers. */
  readonly rankKey: RankKey | null;
  /** 1 for the chosen worker, 2 for the next, ...; null when not eligible. */
  readonly rank: number | null;
  /**
   * Whether it holds the call's image (rules v8 prefer a holder); absent when the call names no
   * image or the rules in force do not read images.
   */
  readonly holdsImage?: boolean;
  /**
   * Its image cost, when it passed every filter (rules v10: the lowest wins); absent otherwise and
   * under earlier rules.
   */
  readonly imageCost?: WorkerImageCost;
}

/** A filter-passing worker's image cost in parts (rules v10). */
export interface WorkerImageCost {
  /** Whether it holds the image (nothing to build). */
  readonly held: boolean;
  /** Its flavor's cheapest start for the call's import hints (0 without a catalogue). */
  readonly cover: number;
  /** The build it would pay: 0 when held; null when no holder recorded one (unknown). */
  readonly build: number | null;
  /** `cover + build`; null when the build is unknown. */
  readonly total: number | null;
}

/** How the call's image counted (rules v8, v10). */
export interface ImageExplanation {
  /** The call's image key (`CallRequested.imageKey`). */
  readonly imageKey: string;
  /** The workers that hold it, by ID. */
  readonly holders: readonly string[];
  /**
   * The worker the image step chose: under rules 8 the holder the call went to (null: none
   * passed, the ranking chose); under 10 the worker of lowest image cost (null: none passed).
   */
  readonly chosen: string | null;
  /**
   * Rules v10: the image's build cost (the longest build its holders recorded); null: unknown.
   * Absent under rules 8 and 9.
   */
  readonly buildCost?: number | null;
  readonly reason: string;
}

/** The session's part in the decision. */
export interface SessionExplanation {
  readonly sessionId: string;
  readonly verdict: string;
}

/** How the checkpoint was chosen. */
export interface CheckpointExplanation {
  readonly flavor: string;
  readonly catalogueRevision: string | null;
  /** The cost table; empty when scoring was skipped (pinned, disabled, no catalogue). */
  readonly rows: readonly CostRow[];
  readonly chosen: string | null;
  readonly reason: string;
}

/** What happened to the requested packages. */
export interface PackagesExplanation {
  readonly requested: readonly string[];
  readonly duplicates: readonly string[];
  readonly skipped: readonly string[];
  readonly kept: readonly string[];
  readonly problem: string | null;
}

/** The whole explanation of one decision. */
export interface PlacementExplanation {
  readonly requestId: string;
  readonly sessionId: string | null;
  readonly budget: Budget;
  readonly config: Pick<Config, 'MEMORY_HEADROOM' | 'GPU_MEMORY_HEADROOM' | 'DEFAULT_MEMORY'>;
  readonly session: SessionExplanation | null;
  /** Every worker the state knows, by ID as text; empty when session affinity decided alone. */
  readonly workers: readonly WorkerExplanation[];
  readonly checkpoint: CheckpointExplanation | null;
  readonly packages: PackagesExplanation;
  /** A pinned call's routing (docs/tenant-routing.md); null for any other call. */
  readonly routing: RoutingExplanation | null;
  /** How the call's image counted; absent when it names none or the rules do not read images. */
  readonly image?: ImageExplanation;
  readonly decision: PlacementDecision;
}

/** A worker's image cost as its explanation carries it (nothing when it has none). */
function imageCostOf(
  costs: ReadonlyMap<string, WorkerImageCost>,
  workerId: string,
): { imageCost?: WorkerImageCost } {
  const imageCost = costs.get(workerId);
  return imageCost === undefined ? {} : { imageCost };
}

/** Collects the explanation while placement decides. */
export class ExplanationBuilder implements RoutingExplainSink {
  private sessionPart: SessionExplanation | null = null;
  private routingPart: RoutingExplanation | null = null;
  private readonly workerParts = new Map<string, Omit<WorkerExplanation, 'rank'>>();
  private checkpointPart: CheckpointExplanation | null = null;
  private imagePart: ImageExplanation | null = null;
  private imageCostParts: ReadonlyMap<string, WorkerImageCost> = new Map();
  private rankedIds: readonly string[] = [];
  private packagesPart: PackagesExplanation = {
    requested: [],
    duplicates: [],
    skipped: [],
    kept: [],
    problem: null,
  };

  constructor(
    private readonly budget: Budget,
    private readonly config: Config,
  ) {}

  /** Records the session's verdict. */
  session(sessionId: string, verdict: string): void {
    this.sessionPart = { sessionId, verdict };
  }

  /** Records a worker that was not a candidate. */
  notCandidate(worker: WorkerRecord, why: string): void {
    this.workerParts.set(worker.workerId, {
      workerId: worker.workerId,
      status: worker.status,
      flavor: worker.flavor,
      notCandidate: why,
      filters: [],
      eligible: false,
      rankKey: null,
    });
  }

  /** Records a candidate with every filter's verdict and reason. */
  candidate(worker: WorkerRecord, verdicts: readonly ExplainedVerdict[], eligible: boolean): void {
    this.workerParts.set(worker.workerId, {
      workerId: worker.workerId,
      status: worker.status,
      flavor: worker.flavor,
      notCandidate: null,
      filters: verdicts.map(({ filter, verdict, reason }) => ({
        filter: filter.name,
        verdict: verdictName(verdict),
        reason,
      })),
      eligible,
      rankKey: eligible ? rankKey(worker, this.budget) : null,
    });
  }

  /** Records the eligible workers, best first. */
  ranking(workerIds: readonly string[]): void {
    this.rankedIds = workerIds;
  }

  /** Records how the checkpoint was chosen. */
  checkpoint(part: CheckpointExplanation): void {
    this.checkpointPart = part;
  }

  /** Records how the call's image counted. */
  image(part: ImageExplanation): void {
    this.imagePart = part;
  }

  /** Records every filter-passing worker's image cost, by worker ID (rules v10). */
  imageCosts(costs: ReadonlyMap<string, WorkerImageCost>): void {
    this.imageCostParts = costs;
  }

  /** Records a pinned call's routing. */
  routing(part: RoutingExplanation): void {
    this.routingPart = part;
  }

  /** Records what happened to the packages. */
  packages(part: Partial<PackagesExplanation>): void {
    this.packagesPart = { ...this.packagesPart, ...part };
  }

  /** The finished explanation; workers have ranks when the call went to a new container. */
  build(
    requestId: string,
    sessionId: string | null,
    decision: PlacementDecision,
  ): PlacementExplanation {
    const image = this.imagePart;
    // The worker the image step chose goes first; the others keep the ranking's order.
    const chosenHolder = image?.chosen ?? null;
    const order =
      chosenHolder === null
        ? this.rankedIds
        : [chosenHolder, ...this.rankedIds.filter((id) => id !== chosenHolder)];
    const ranked = decision.outcome === 'placed' && decision.containerId === null ? order : [];
    const ranks = new Map(ranked.map((id, index) => [id, index + 1]));
    const workers = [...this.workerParts.values()]
      .sort((a, b) => compareText(a.workerId, b.workerId))
      .map((part) => ({
        ...part,
        rank: ranks.get(part.workerId) ?? null,
        ...(image === null ? {} : { holdsImage: image.holders.includes(part.workerId) }),
        ...imageCostOf(this.imageCostParts, part.workerId),
      }));
    return {
      requestId,
      sessionId,
      budget: this.budget,
      config: {
        MEMORY_HEADROOM: this.config.MEMORY_HEADROOM,
        GPU_MEMORY_HEADROOM: this.config.GPU_MEMORY_HEADROOM,
        DEFAULT_MEMORY: this.config.DEFAULT_MEMORY,
      },
      session: this.sessionPart,
      workers,
      checkpoint: this.checkpointPart,
      packages: this.packagesPart,
      routing: this.routingPart,
      ...(image === null ? {} : { image }),
      decision,
    };
  }
}
