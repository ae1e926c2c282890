/**
 * Telling workers what to keep and what to pre-warm (shell). After any append that can change a
 * worker's protected set (a pin change, a registration, a worker leaving or evicted, a catalogue),
 * and on every reaper interval (versions leave `PIN_RETENTION`), it records the core's protection
 * decision (`ResidencyProtected` for each worker whose set changed) and sends each such worker its
 * set through the worker's `ResidencyService`. A worker that registers is sent its set even when
 * unchanged (it may have restarted). A staged pin, a flip, a rollback or a new k asks the members
 * of the version's subset that do not hold it to pre-warm it, and a pinned call shed because its
 * cold load would outlast its deadline asks the worker that would have loaded it (placement's
 * `prewarm`). Sends that fail are retried on the next interval. No worker reads the table: this
 * is the only way it learns what to keep.
 */
import type { Metadata, ServiceError } from '@grpc/grpc-js';
import type { Decision } from '../../core/decision.js';
import { decide } from '../../core/decisions.js';
import type { PlacementCaches, PlacementDecision } from '../../core/placement/index.js';
import { CHANGES_PROTECTION, keptOn } from '../../core/pins/index.js';
import { hasAddress, holdsVersion, isLive, type ClusterState } from '../../projections/index.js';
import type { Config } from '../../shared/config.js';
import type { Journal } from '../journal/index.js';
import type { Logger } from '../observability/logger.js';
import type { WorkerConnections } from '../workers/index.js';

/** What the keeper needs. */
export interface ResidencyKeeperOptions {
  readonly journal: Journal;
  readonly connections: WorkerConnections;
  /** Placement's caches for the journal's state (their subset cache). */
  readonly placement: PlacementCaches;
  readonly config: Config;
  /** The router's clock, epoch ms. */
  readonly clock: () => number;
  readonly logger: Logger;
  /** The router's own credential for workers (cloned per request). */
  readonly workerMetadata: Metadata;
  /** Deadline of one request to a worker (default 5 s). */
  readonly requestTimeoutMs?: number;
}

/** Keeps every worker told what to keep. */
export class ResidencyKeeper {
  private timer: NodeJS.Timeout | undefined;
  private scheduled = false;
  private refreshing = false;
  /** Workers to send their set to at the next refresh (registered, or a failed send). */
  private readonly owed = new Set<string>();
  /** Pre-warms to ask at the next refresh: worker ID to versions. */
  private readonly prewarms = new Map<string, Set<string>>();
  private stopped = false;

  constructor(private readonly options: ResidencyKeeperOptions) {
    options.journal.onRecorded((decision) => this.recorded(decision));
  }

  /** Starts the interval (every `REAPER_INTERVAL`) and refreshes once now. */
  start(): void {
    const every = Math.max(1_000, this.options.config.REAPER_INTERVAL);
    this.timer = setInterval(() => this.refresh(), every);
    this.timer.unref();
    for (const worker of this.options.journal.state.workers.values()) {
      if (isLive(worker)) this.owed.add(worker.workerId);
    }
    this.schedule();
  }

  /** Stops the interval; sends in flight finish on their own. */
  stop(): void {
    this.stopped = true;
    clearInterval(this.timer);
  }

  /** Records what changed and sends what is owed, now (the interval does it too). */
  refresh(): void {
    this.scheduled = false;
    if (this.stopped || this.options.journal.failed) return;
    const { journal, clock, placement, logger } = this.options;
    this.refreshing = true;
    try {
      journal.record(
        decide('protection', journal.state, { now: clock(), subsets: placement.subsets }),
      );
    } catch (error) {
      logger.error({ err: error }, 'could not record what workers must keep');
      return;
    } finally {
      this.refreshing = false;
    }
    const state = journal.state;
    for (const workerId of [...this.owed]) {
      this.owed.delete(workerId);
      const ids = state.routing.workers.get(workerId)?.protectedIds ?? [];
      this.protect(state, workerId, ids, state.lastSeq);
    }
    for (const [workerId, versions] of [...this.prewarms]) {
      this.prewarms.delete(workerId);
      for (const version of versions) this.prewarm(state, workerId, version);
    }
  }

  private recorded(decision: Decision): void {
    const state = this.options.journal.state;
    let changed = false;
    for (const event of decision.events) {
      if (event.type === 'ResidencyProtected') this.owed.add(event.workerId);
      if (event.type === 'WorkerRegistered') this.owed.add(event.workerId);
      if (event.type === 'PinStaged') {
        for (const workerId of event.targetWorkers) this.owePrewarm(state, workerId, event.version);
      }
      if (event.type === 'RoutingRevised' && event.version !== null) {
        const kept = { tenantId: event.tenantId, version: event.version, k: event.k ?? 1 };
        const members = keptOn(
          state,
          { ...kept, reason: 'pinned', alsoOn: [] },
          this.options.placement.subsets,
        );
        for (const workerId of members) this.owePrewarm(state, workerId, event.version);
      }
      if (CHANGES_PROTECTION.has(event.type)) changed = true;
    }
    // A pinned call shed because its cold load would outlast its deadline: the load starts all
    // the same, as a pre-warm, for the calls that follow (a call's or an admission's decision).
    const { placement } = decision as { placement?: PlacementDecision | null };
    if (placement?.outcome === 'rejected' && placement.prewarm !== undefined) {
      this.owePrewarm(state, placement.prewarm.workerId, placement.prewarm.version);
    }
    if (changed || this.owed.size > 0 || this.prewarms.size > 0) this.schedule();
  }

  private owePrewarm(state: ClusterState, workerId: string, version: string): void {
    if (holdsVersion(state.routing, workerId, version)) return;
    // Already loading there (a pre-warm asked by an earlier shed call, say): not asked again.
    if (state.routing.workers.get(workerId)?.versions.get(version)?.state === 'loading') return;
    const versions = this.prewarms.get(workerId) ?? new Set<string>();
    versions.add(version);
    this.prewarms.set(workerId, versions);
  }

  /** Refreshes once the current append (and its caller's synchronous work) is done. */
  private schedule(): void {
    if (this.scheduled || this.stopped || this.refreshing) return;
    this.scheduled = true;
    queueMicrotask(() => this.refresh());
  }

  private addressOf(state: ClusterState, workerId: string): string | null {
    const worker = state.workers.get(workerId);
    return worker && isLive(worker) && hasAddress(worker) ? worker.address : null;
  }

  private deadline(): Date {
    return new Date(this.options.clock() + (this.options.requestTimeoutMs ?? 5_000));
  }

  private protect(
    state: ClusterState,
    workerId: string,
    checkpointIds: string[],
    seq: number,
  ): void {
    const address = this.addressOf(state, workerId);
    if (address === null) return;
    const { connections, workerMetadata, logger } = this.options;
    connections
      .residency(address)
      .protect(
        { checkpointIds, seq },
        workerMetadata.clone(),
        { deadline: this.deadline() },
        (error: ServiceError | null) => {
          if (!error) {
            logger.debug({ workerId, checkpointIds }, 'worker told what to keep');
            return;
          }
          logger.warn(
            { workerId, checkpointIds, err: error.message },
            'could not tell a worker what to keep; retrying at the next interval',
          );
          this.owed.add(workerId);
        },
      );
  }

  private prewarm(state: ClusterState, workerId: string, checkpointId: string): void {
    const address = this.addressOf(state, workerId);
    if (address === null) return;
    const { connections, workerMetadata, logger } = this.options;
    connections
      .residency(address)
      .prewarm(
        { checkpointId },
        workerMetadata.clone(),
        { deadline: this.deadline() },
        (error: ServiceError | null) => {
          if (error) {
            logger.warn({ workerId, checkpointId, err: error.message }, 'pre-warm refused');
          } else logger.info({ workerId, checkpointId }, 'pre-warm asked');
        },
      );
  }
}
