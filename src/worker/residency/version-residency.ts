/**
 * The versions a worker holds (docs/tenant-routing.md): which catalogue checkpoints are loaded,
 * loading, cached on disk, evicted or failed; loading one on demand (a cold load or a pre-warm:
 * built by the restore backend, or restored from its cached tier) within the resident budget,
 * evicting the least recently used among those the router did not say to keep and no running
 * call uses; and reporting every change to the router. Loads run one at a time, so the budget is
 * never counted twice. The worker never reads the routing table: the router's `Protect` tells it
 * what to keep.
 */
import type { Logger } from 'pino';
import type { CheckpointSpec } from '../../events/catalogue.js';
import type { ResidencyState } from '../../events/schema.js';
import { formatSize } from '../../shared/units.js';
import type { RestoreBackend } from '../checkpoints/index.js';
import type { ContainerPool } from '../containers/index.js';
import { UnknownVersionError, VersionLoadError } from '../core/errors.js';
import { planLoad, type HeldVersion } from '../core/residency/eviction-plan.js';

/** One version's state as the worker reports it. */
export interface VersionState {
  readonly checkpointId: string;
  readonly state: ResidencyState;
  readonly error: string | null;
}

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
}

interface Entry {
  state: ResidencyState;
  error: string | null;
  lastUsed: number;
}

/** The worker's versions. */
export class VersionResidency {
  private readonly entries = new Map<string, Entry>();
  private readonly loads = new Map<string, Promise<void>>();
  private queue: Promise<void> = Promise.resolve();
  private protectedIds: ReadonlySet<string> = new Set();
  private protectSeq = -1;
  private readonly users = new Map<string, number>();

  constructor(private readonly options: VersionResidencyOptions) {
    for (const checkpointId of options.backend.held()) {
      if (options.specs.has(checkpointId)) this.entries.set(checkpointId, this.entry('resident'));
    }
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
    return this.entries.get(checkpointId)?.state ?? null;
  }

  /** The versions the router said to keep. */
  get protected(): ReadonlySet<string> {
    return this.protectedIds;
  }

  /** Every version with a state, for the full report after a registration. */
  all(): VersionState[] {
    return [...this.entries]
      .map(([checkpointId, entry]) => ({ checkpointId, state: entry.state, error: entry.error }))
      .sort((a, b) =>
        a.checkpointId < b.checkpointId ? -1 : a.checkpointId > b.checkpointId ? 1 : 0,
      );
  }

  /** The router's set of versions to keep; an older set (by `seq`) never replaces a newer one. */
  protect(checkpointIds: readonly string[], seq: number): boolean {
    if (seq < this.protectSeq) return false;
    this.protectSeq = seq;
    this.protectedIds = new Set(checkpointIds);
    this.options.log.info({ protected: checkpointIds, seq }, 'versions to keep, from the router');
    return true;
  }

  /** Counts a running call of the version (never evicted while counted); returns the release. */
  use(checkpointId: string): () => void {
    this.users.set(checkpointId, (this.users.get(checkpointId) ?? 0) + 1);
    const entry = this.entries.get(checkpointId);
    if (entry) entry.lastUsed = Date.now();
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.users.get(checkpointId) ?? 1) - 1;
      if (left <= 0) this.users.delete(checkpointId);
      else this.users.set(checkpointId, left);
      const held = this.entries.get(checkpointId);
      if (held) held.lastUsed = Date.now();
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
      const entry = this.entries.get(checkpointId) as Entry;
      entry.lastUsed = Date.now();
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
    const held = new Set(this.options.backend.held());
    for (const [checkpointId, entry] of this.entries) {
      if (entry.state === 'resident' && !held.has(checkpointId)) {
        this.set(checkpointId, this.options.backend.hasImage(checkpointId) ? 'cached' : 'evicted');
      } else if (
        (entry.state === 'evicted' || entry.state === 'cached') &&
        held.has(checkpointId) &&
        this.options.backend.isResident(checkpointId)
      ) {
        this.set(checkpointId, 'resident');
      }
    }
  }

  private isResidentNow(checkpointId: string): boolean {
    return (
      this.entries.get(checkpointId)?.state === 'resident' &&
      this.options.backend.held().includes(checkpointId)
    );
  }

  private entry(state: ResidencyState): Entry {
    return { state, error: null, lastUsed: Date.now() };
  }

  private bytesOf(checkpointId: string): number {
    return this.options.specs.get(checkpointId)?.residentMemory ?? 0;
  }

  private set(checkpointId: string, state: ResidencyState, error: string | null = null): void {
    const entry = this.entries.get(checkpointId) ?? this.entry(state);
    entry.state = state;
    entry.error = error;
    this.entries.set(checkpointId, entry);
    this.options.report([{ checkpointId, state, error }]);
  }

  private held(): HeldVersion[] {
    return [...this.entries]
      .filter(([, entry]) => entry.state === 'resident' || entry.state === 'loading')
      .map(([checkpointId, entry]) => ({
        checkpointId,
        bytes: this.bytesOf(checkpointId),
        lastUsed: entry.lastUsed,
        protected: this.protectedIds.has(checkpointId),
        inUse: (this.users.get(checkpointId) ?? 0) > 0,
        loading: entry.state === 'loading',
      }));
  }

  private async load(checkpointId: string): Promise<void> {
    const { backend, pool, log, workerId } = this.options;
    if (this.isResidentNow(checkpointId)) return;
    const spec = this.options.specs.get(checkpointId) as CheckpointSpec;
    const bytes = this.bytesOf(checkpointId);
    const plan = planLoad(this.options.budget, checkpointId, bytes, this.held());
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
    const state = backend.hasImage(checkpointId) ? 'cached' : 'evicted';
    this.set(checkpointId, state);
    log.info({ checkpointId, now: state }, 'version evicted (least recently used, not protected)');
  }
}
