/**
 * The versions a worker holds (docs/tenant-routing.md): which catalogue checkpoints are loaded,
 * loading, cached on disk, evicted or failed; loading one on demand (a cold load or a pre-warm:
 * built by the restore backend, or restored from its cached tier) within the resident budget,
 * evicting the least recently used among those the router did not say to keep and no running
 * call uses; and reporting every change to the router. Loads run one at a time, so the budget is
 * never counted twice. The worker never reads the routing table: the router's `Protect` tells it
 * what to keep. The versions' record and its rules (recency, protection, the eviction plan) are
 * the worker core's (src/worker/core/residency); this shell builds and drops checkpoints and
 * reports.
 */
import type { Logger } from 'pino';
import type { CheckpointSpec } from '../../events/catalogue.js';
import type { ResidencyState } from '../../events/schema.js';
import { formatSize } from '../../shared/units.js';
import type { RestoreBackend } from '../checkpoints/index.js';
import type { ContainerPool } from '../containers/index.js';
import { UnknownVersionError, VersionLoadError } from '../core/errors.js';
import {
  acceptsProtection,
  backendChanges,
  evictedState,
  evolveVersions,
  isResidentNow,
  planVersionLoad,
  reportedVersions,
  startingVersions,
  type VersionChange,
  type Versions,
  type VersionState,
} from '../core/residency/index.js';

export type { VersionState } from '../core/residency/index.js';

/** What the residency needs. */
export interface VersionResidencyOptions {
  readonly workerId: string;
  /** The worker's catalogue entries for its flavor, by ID. */
  readonly specs: ReadonlyMap<string, CheckpointSpec>;
  /** The resident budget in bytes (`--resident-memory`); null: no limit. */
  readonly budget: number | null;
  readonly backend: RestoreBackend;
  readonly pool: ContainerPool;
  /** Tells the router of changed versions. */
  readonly report: (changed: readonly VersionState[]) => void;
  readonly log: Logger;
  /** The worker's clock, epoch ms (default `Date.now`): what a call used last is evicted first. */
  readonly clock?: () => number;
}

/** The worker's versions. */
export class VersionResidency {
  private versions: Versions;
  private readonly loads = new Map<string, Promise<void>>();
  private queue: Promise<void> = Promise.resolve();
  private readonly clock: () => number;

  constructor(private readonly options: VersionResidencyOptions) {
    this.clock = options.clock ?? Date.now;
    this.versions = startingVersions(options.backend.held(), options.specs, this.clock());
  }

  private change(change: VersionChange): void {
    this.versions = evolveVersions(this.versions, change, this.clock());
  }

  /** The resident budget, bytes (null: none). */
  get budget(): number | null {
    return this.options.budget;
  }

  /** Whether the worker's catalogue lists the version. */
  knows(checkpointId: string): boolean {
    return this.options.specs.has(checkpointId);
  }

  /** What the worker reports of a version (null: nothing). */
  stateOf(checkpointId: string): ResidencyState | null {
    return this.versions.entries.get(checkpointId)?.state ?? null;
  }

  /** The versions the router said to keep. */
  get protected(): ReadonlySet<string> {
    return this.versions.protectedIds;
  }

  /** Every version with a state, for the full report after a registration. */
  all(): VersionState[] {
    return reportedVersions(this.versions);
  }

  /** The router's set of versions to keep; an older set (by `seq`) never replaces a newer one. */
  protect(checkpointIds: readonly string[], seq: number): boolean {
    if (!acceptsProtection(this.versions, seq)) return false;
    this.change({ type: 'protected', checkpointIds, seq });
    this.options.log.info({ protected: checkpointIds, seq }, 'versions to keep, from the router');
    return true;
  }

  /** Counts a running call of the version (never evicted while counted); returns the release. */
  use(checkpointId: string): () => void {
    this.change({ type: 'call-started', checkpointId });
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.change({ type: 'call-ended', checkpointId });
    };
  }

  /**
   * The version resident, loading it first when it is not (reporting loading, then resident or
   * failed). Rejects with UnknownVersionError or VersionLoadError naming the version and why.
   */
  async ensure(checkpointId: string): Promise<void> {
    if (!this.knows(checkpointId)) {
      throw new UnknownVersionError(
        `version "${checkpointId}" is not in worker ${this.options.workerId}'s catalogue`,
      );
    }
    if (this.isResidentNow(checkpointId)) {
      this.change({ type: 'used', checkpointId });
      return;
    }
    let load = this.loads.get(checkpointId);
    if (!load) {
      load = this.queue.then(() => this.load(checkpointId));
      this.queue = load.catch(() => undefined);
      this.loads.set(checkpointId, load);
      void load.catch(() => undefined).finally(() => this.loads.delete(checkpointId));
    }
    await load;
  }

  /** Starts loading the version in the background (a pre-warm); its current state. */
  prewarm(checkpointId: string): ResidencyState {
    if (!this.knows(checkpointId)) {
      throw new UnknownVersionError(
        `version "${checkpointId}" is not in worker ${this.options.workerId}'s catalogue`,
      );
    }
    if (this.isResidentNow(checkpointId)) return 'resident';
    this.ensure(checkpointId).catch((error: Error) =>
      this.options.log.warn({ checkpointId, err: error.message }, 'pre-warm failed'),
    );
    return 'loading';
  }

  /** The backend's held set changed (a template died, an image was discarded): report it. */
  sync(): void {
    const { backend } = this.options;
    const changes = backendChanges(this.versions, {
      held: new Set(backend.held()),
      hasImage: (checkpointId) => backend.hasImage(checkpointId),
      isResident: (checkpointId) => backend.isResident(checkpointId),
    });
    for (const { checkpointId, state } of changes) this.set(checkpointId, state);
  }

  private isResidentNow(checkpointId: string): boolean {
    return isResidentNow(this.versions, checkpointId, this.options.backend.held());
  }

  private bytesOf(checkpointId: string): number {
    return this.options.specs.get(checkpointId)?.residentMemory ?? 0;
  }

  private set(checkpointId: string, state: ResidencyState, error: string | null = null): void {
    this.change({ type: 'state', checkpointId, state, error });
    this.options.report([{ checkpointId, state, error }]);
  }

  private async load(checkpointId: string): Promise<void> {
    const { backend, pool, log, workerId } = this.options;
    if (this.isResidentNow(checkpointId)) return;
    const spec = this.options.specs.get(checkpointId) as CheckpointSpec;
    const bytes = this.bytesOf(checkpointId);
    const plan = planVersionLoad(this.versions, checkpointId, this.options.budget, (id) =>
      this.bytesOf(id),
    );
    if (!plan.ok) {
      this.set(checkpointId, 'failed', plan.problem);
      throw new VersionLoadError(
        `version "${checkpointId}" could not be loaded on worker ${workerId}: ${plan.problem}`,
      );
    }
    for (const victim of plan.evict) await this.evict(victim);
    const started = performance.now();
    this.set(checkpointId, 'loading');
    try {
      if (!backend.held().includes(checkpointId)) {
        await backend.build({
          id: spec.id,
          modules: spec.modules,
          ...(spec.setup === undefined ? {} : { setup: spec.setup }),
        });
      }
      pool.keepStandbys(checkpointId);
      pool.refreshStandbys();
    } catch (error) {
      const problem = (error as Error).message;
      this.set(checkpointId, 'failed', problem);
      log.warn({ checkpointId, err: problem }, 'loading a version failed');
      throw new VersionLoadError(
        `version "${checkpointId}" could not be loaded on worker ${workerId}: ${problem}`,
      );
    }
    this.set(checkpointId, 'resident');
    log.info(
      {
        checkpointId,
        ms: Math.round(performance.now() - started),
        residentMemory: bytes,
        budget: this.options.budget,
      },
      `version loaded (${formatSize(bytes)} resident)`,
    );
  }

  private async evict(checkpointId: string): Promise<void> {
    const { backend, pool, log } = this.options;
    pool.dropStandbys(checkpointId);
    await backend.dropResident(checkpointId);
    const state = evictedState(backend.hasImage(checkpointId));
    this.set(checkpointId, state);
    log.info({ checkpointId, now: state }, 'version evicted (least recently used, not protected)');
  }
}
