/**
 * The containers a worker holds: creating them (restored from a checkpoint, or cold), resuming a
 * session's container, releasing and destroying them, reaping idle ones, and keeping standby
 * containers restored ahead of demand. Every state change the router should know is reported
 * through `report`. The rules (slots, which session owns a container, idle expiry) are the
 * worker core's (src/worker/core/containers); the pool keeps the processes, cgroups and timers.
 */
import { rm } from 'node:fs/promises';
import { ContainerState } from '../../proto/gen/readie/v1/registry.js';
import { StatusError } from '../../shared/status-error.js';
import {
  admitCall,
  checkResumable,
  expiresIdle,
  idleExpiresIn,
  keptForSession,
  sessionEnd,
  slotsHeld,
  STANDBY_DEMAND_SPANS,
  standbyMemoryRoom,
  standbyRoom,
  type SlotCount,
} from '../core/containers/index.js';
import { ContainerUnavailableError, ShuttingDownError } from '../core/errors.js';
import { ExecutorConnection } from '../executor-link/index.js';
import type { ImageLayer } from '../sandbox/index.js';
import type { Container } from './container.js';
import {
  ContainerFactory,
  type ContainerFactoryOptions,
  type SnapshotStart,
} from './container-factory.js';
import { StandbyShelf } from './standby-shelf.js';

/** A new container whose executor has answered, with that open connection. */
export interface AnsweringContainer {
  readonly container: Container;
  /** The connection that read its HELLO; the first call starts on it. */
  readonly connection: ExecutorConnection;
  /** Set when a checkpoint was asked for but the container started cold: why. */
  readonly fallback: string | null;
}

/** A container state change, as the router hears it. */
export interface ContainerReport {
  readonly containerId: string;
  readonly state: ContainerState;
  readonly checkpointId: string;
}

/** What the pool needs. */
export interface ContainerPoolOptions extends ContainerFactoryOptions {
  /**
   * The most containers held or starting for calls at once; 0 for no limit (WORKER_MAX_EXECUTORS).
   * A container being destroyed holds no slot. Standbys never keep a call out: they fill only
   * slots no call holds, and one is destroyed when a call needs its slot.
   */
  readonly maxContainers: number;
  /**
   * Idle session containers are destroyed (and reported removed) this long after their last call
   * ended (EXECUTOR_TTL): the worker owns this policy, the router only forgets a record whose
   * removal it never heard of.
   */
  readonly idleTtlMs: number;
  /** Containers kept restored ahead of demand, per held checkpoint (0: restore on demand). */
  readonly standbyPerCheckpoint: number;
  /** The most standbys per checkpoint that recent demand keeps (`--standby-max`). */
  readonly standbyMax: number;
  /** The memory the worker offers (bytes): standbys fill only what its containers leave. */
  readonly memoryTotal: number;
  /** How often standbys above demand go (ms; default 5 s). */
  readonly standbyTrimMs?: number;
  /** The spans demand is counted over (default: a second, within the last `idleTtlMs`). */
  readonly standbyDemandSpans?: { readonly burstMs: number; readonly windowMs: number };
  /** The memory limit of a standby container until a call takes it (DEFAULT_MEMORY). */
  readonly standbyMemory: number;
  /** How long a standby's executor may take to answer its first dial (DIAL_TOTAL_TIMEOUT). */
  readonly dialTimeoutMs: number;
  readonly report: (report: ContainerReport) => void;
  /** The worker's clock, epoch ms (default `Date.now`): idle containers expire by it. */
  readonly clock?: () => number;
}

const DESTROY_WAIT_MS = 5_000;
/** How often standbys above what demand keeps go (ms). */
const STANDBY_TRIM_MS = 5_000;
/** How long a container whose connection broke before its HELLO gets to show it has exited. */
const EXIT_WAIT_MS = 2_000;

/** The worker's containers. */
export class ContainerPool {
  private readonly containers = new Map<string, Container>();
  private readonly destructions = new Map<string, Promise<void>>();
  private readonly creations = new Set<Promise<unknown>>();
  private starting = 0;
  private closing = false;
  /** Aborted when the pool closes: abandons dials of containers still starting. */
  private readonly closed = new AbortController();
  /** Whether idle containers expire (from `startReaper` until `close`). */
  private reaping = false;
  /** Trims standbys above demand, from `startReaper` until `close`. */
  private trimTimer: NodeJS.Timeout | null = null;

  private readonly factory: ContainerFactory;
  private readonly standbys: StandbyShelf;
  private readonly clock: () => number;

  constructor(private readonly options: ContainerPoolOptions) {
    this.factory = new ContainerFactory(options);
    this.clock = options.clock ?? Date.now;
    this.standbys = new StandbyShelf({
      perCheckpoint: options.standbyPerCheckpoint,
      // Demand is remembered as long as an idle session container is kept (EXECUTOR_TTL).
      demand: {
        ...(options.standbyDemandSpans ?? { ...STANDBY_DEMAND_SPANS, windowMs: options.idleTtlMs }),
        cap: options.standbyMax,
      },
      clock: this.clock,
      memory: options.standbyMemory,
      held: () => options.backend.held(),
      room: () => Math.min(standbyRoom(this.slots()), this.standbyMemoryRoom()),
      restore: (memory, checkpointId) => this.startAnswering(memory, checkpointId, null),
      destroy: (container) => this.destroy(container),
      log: options.log,
    });
  }

  /**
   * Container slots held: containers held for calls or sessions and those being started for calls
   * (standbys, and containers being destroyed, excluded). The router counts the same way.
   */
  get count(): number {
    return slotsHeld(this.starting, this.containers.values());
  }

  private slots(): SlotCount {
    return {
      maxContainers: this.options.maxContainers,
      held: this.count,
      standbys: this.standbys.size,
    };
  }

  /** Standby containers on the shelf and being restored: the slots they fill. */
  get standbyCount(): number {
    return this.standbys.size;
  }

  /** The ready standbys per checkpoint, for the load report. */
  standbyCounts(): { checkpointId: string; ready: number }[] {
    return this.standbys.readyCounts();
  }

  /** How many more standbys the memory takes: what held containers' limits and standbys leave. */
  private standbyMemoryRoom(): number {
    let committed = this.standbys.size * this.standbys.memoryPerStandby;
    for (const container of this.containers.values()) {
      if (container.state !== 'removed') committed += container.memoryLimit;
    }
    return standbyMemoryRoom(this.options.memoryTotal - committed, this.standbys.memoryPerStandby);
  }

  /** The containers held for calls, in no particular order. */
  list(): Container[] {
    return [...this.containers.values()];
  }

  /**
   * Every container held for calls and sessions, as a full report lists it (those being destroyed
   * and standbys excluded): its ID, state and the checkpoint it was restored from.
   */
  held(): { containerId: string; state: 'busy' | 'ready'; checkpointId: string }[] {
    const held: { containerId: string; state: 'busy' | 'ready'; checkpointId: string }[] = [];
    for (const container of this.containers.values()) {
      if (container.state !== 'busy' && container.state !== 'ready') continue;
      held.push({
        containerId: container.id,
        state: container.state,
        checkpointId: container.checkpointId,
      });
    }
    return held;
  }

  /**
   * Creates a container with `memory` as its limit for `sessionId` (empty: no session) and waits
   * for its executor's HELLO: a standby of `checkpointId`, else one restored from it, else (no
   * checkpoint, a restore that fails or dies before it answers) a cold one. `signal` abandons
   * it (the container is destroyed). `exact`: never fall back to a cold start (a pinned call's
   * version): a failed restore throws. `layer`: the call's image, bound in (never a standby: a
   * standby was made before anyone knew the image). `start`: the image's snapshot, which it is
   * restored from when it can be (else as without it).
   */
  async create(
    memory: number,
    checkpointId: string,
    signal?: AbortSignal,
    sessionId = '',
    exact = false,
    layer: ImageLayer | null = null,
    start: SnapshotStart | null = null,
  ): Promise<AnsweringContainer> {
    if (this.closing) throw new ShuttingDownError('the worker is shutting down');
    const admission = admitCall(this.slots());
    if (!admission.admitted) throw admission.refusal;
    this.starting += 1;
    // Demand for standbys of the checkpoint: the restock after this call keeps up with it.
    if (checkpointId !== '') this.standbys.started(checkpointId);
    // Standbys fill only free slots: the call takes one of its checkpoint, or one of another
    // checkpoint gives its slot up.
    if (admission.standbyGivesUp) this.standbys.giveUpOne(checkpointId);
    try {
      const standby =
        checkpointId === '' || layer
          ? null
          : await this.standbys.take(checkpointId, memory, signal);
      if (standby) {
        this.adopt(standby.container, sessionId);
        return { ...standby, fallback: null };
      }
      const creation = exact
        ? this.startAnswering(memory, checkpointId, signal ?? null, layer).then((made) => ({
            ...made,
            fallback: null,
          }))
        : this.startWithFallback(memory, checkpointId, signal ?? null, layer, start);
      this.creations.add(creation);
      const created = await creation.finally(() => this.creations.delete(creation));
      if (this.closing) {
        created.connection.destroy();
        // The pool closed while this container started: it must not outlive the pool.
        await this.destroy(created.container);
        throw new ShuttingDownError('the worker is shutting down');
      }
      this.adopt(created.container, sessionId);
      if (created.container.checkpointId !== '') {
        this.standbys.restock(created.container.checkpointId);
      }
      return created;
    } catch (error) {
      if (signal?.aborted) throw signal.reason;
      // Its own status (an executor that never said HELLO is DEADLINE_EXCEEDED, shutdown UNAVAILABLE).
      if (error instanceof StatusError) throw error;
      throw new ContainerUnavailableError(
        `could not create a container: ${(error as Error).message}`,
      );
    } finally {
      this.starting -= 1;
    }
  }

  /** Image snapshots, made and reopened by the worker's images (ContainerFactory's). */
  get imageSnapshots(): Pick<
    ContainerFactory,
    'dumpImageSnapshot' | 'reopenImageSnapshot' | 'makesImageSnapshots'
  > {
    return this.factory;
  }

  private adopt(container: Container, sessionId: string): void {
    container.state = 'busy';
    container.sessionId = sessionId;
    this.containers.set(container.id, container);
    this.reportState(container, ContainerState.CONTAINER_STATE_BUSY);
  }

  /**
   * Restores from the image's snapshot `start`, else from `checkpointId` if it is not empty,
   * falling back to a cold start.
   */
  private async startWithFallback(
    memory: number,
    checkpointId: string,
    signal: AbortSignal | null,
    layer: ImageLayer | null,
    start: SnapshotStart | null = null,
  ): Promise<AnsweringContainer> {
    if (start) {
      try {
        return {
          ...(await this.startAnswering(memory, checkpointId, signal, layer, start)),
          fallback: null,
        };
      } catch (error) {
        signal?.throwIfAborted();
        this.closed.signal.throwIfAborted();
        this.options.log.warn(
          { image: start.imageId, err: (error as Error).message },
          "an image's snapshot did not restore; its container enters the image instead",
        );
      }
    }
    let fallback: string | null = null;
    if (checkpointId !== '') {
      try {
        return { ...(await this.startAnswering(memory, checkpointId, signal, layer)), fallback };
      } catch (error) {
        signal?.throwIfAborted();
        this.closed.signal.throwIfAborted();
        fallback = (error as Error).message;
        this.options.log.warn({ checkpointId, err: fallback }, 'a restore failed; starting cold');
      }
    }
    return { ...(await this.startAnswering(memory, '', signal, layer)), fallback };
  }

  /**
   * Makes a container (restored from `checkpointId`, or cold if it is empty) and dials its
   * executor until the HELLO; a container that never answers is destroyed and the error thrown.
   */
  private async startAnswering(
    memory: number,
    checkpointId: string,
    signal: AbortSignal | null,
    layer: ImageLayer | null = null,
    start: SnapshotStart | null = null,
  ): Promise<Omit<AnsweringContainer, 'fallback'>> {
    const container = await this.factory.make(memory, checkpointId, layer, start);
    void container.process.exited.then(() => this.onExit(container));
    const abandon = [this.closed.signal, ...(signal ? [signal] : [])];
    try {
      const connection = await ExecutorConnection.dial(container.paths.socket, {
        timeoutMs: this.options.dialTimeoutMs,
        signal: AbortSignal.any([...abandon, container.exitSignal]),
      });
      return { container, connection };
    } catch (error) {
      const abandoned = abandon.some((reason) => reason.aborted);
      const died = !abandoned && (await container.exitsWithin(EXIT_WAIT_MS));
      const cause = died ? await container.exitCause() : null;
      await this.destroy(container);
      for (const reason of abandon) reason.throwIfAborted();
      if (cause === null) throw error;
      throw new Error(`the container died before its executor answered: ${cause}`);
    }
  }

  /** Drops standbys of checkpoints no longer held, and restocks those that are. */
  refreshStandbys(): void {
    this.standbys.refresh();
  }

  /** Standbys above what demand keeps now go (done every few seconds once the reaper runs). */
  trimStandbys(): void {
    if (!this.closing) this.standbys.trim();
  }

  /** How many standbys of `checkpointId` the worker keeps now (demand's target, before room). */
  standbyTarget(checkpointId: string): number {
    return this.standbys.target(checkpointId);
  }

  /** How many standbys of `checkpointId` are on the shelf now. */
  standbysOf(checkpointId: string): number {
    return this.standbys.count(checkpointId);
  }

  /** Whether standbys of `checkpointId` are kept restored (part of its `resident` tier). */
  keepsStandbys(checkpointId: string): boolean {
    return this.standbys.keeps(checkpointId);
  }

  /** Destroys the standbys of `checkpointId` and keeps none until `keepStandbys`. */
  dropStandbys(checkpointId: string): void {
    this.standbys.drop(checkpointId);
  }

  /** Keeps standbys of `checkpointId` again. */
  keepStandbys(checkpointId: string): void {
    this.standbys.keep(checkpointId);
  }

  /**
   * Takes a session's idle container for a call of that session, re-applying the call's memory
   * limit; a container of another session (or of none) is refused, whoever asks.
   */
  async resume(
    containerId: string,
    memory: number,
    requestId: string,
    sessionId: string,
  ): Promise<Container> {
    if (this.closing) throw new ShuttingDownError('the worker is shutting down');
    const container = this.containers.get(containerId);
    checkResumable(container, containerId, sessionId);
    container.state = 'busy';
    container.requestId = requestId;
    this.stopIdleTimer(container);
    try {
      await container.cgroup.setLimit(memory);
    } catch (error) {
      container.state = 'ready';
      container.requestId = '';
      this.startIdleTimer(container);
      throw new ContainerUnavailableError(
        `cannot resume container ${containerId}: ${(error as Error).message}`,
      );
    }
    this.reportState(container, ContainerState.CONTAINER_STATE_BUSY);
    return container;
  }

  /**
   * The router ended `sessionId`: its container `containerId` is destroyed now (and reported
   * removed), or when the call running in it ends. False when this worker does not hold it; a
   * container of another session (or of none) is refused, whoever asks.
   */
  async endSession(containerId: string, sessionId: string): Promise<boolean> {
    const container = this.containers.get(containerId);
    const end = sessionEnd(container, containerId, sessionId);
    if (container === undefined || end.step === 'not-held') return false;
    if (end.step === 'refused') throw end.refusal;
    this.options.log.info({ containerId, sessionId }, 'session ended: destroying its container');
    if (end.step === 'after-call') {
      container.sessionEnded = true;
      return true;
    }
    await this.destroy(container);
    return true;
  }

  /** After a call: keep the container for its session (ready) or destroy it, in the background. */
  release(container: Container, keep: boolean): void {
    if (keptForSession(container, keep, this.closing)) {
      container.state = 'ready';
      container.requestId = '';
      container.lastUsedAt = this.clock();
      this.startIdleTimer(container);
      this.reportState(container, ContainerState.CONTAINER_STATE_READY);
      return;
    }
    void this.destroy(container);
  }

  /** Kills a container, removes its cgroup and files, and reports it removed. */
  destroy(container: Container): Promise<void> {
    const pending = this.destructions.get(container.id);
    if (pending) return pending;
    if (container.state === 'removed') return Promise.resolve();
    const destruction = this.tearDown(container).finally(() =>
      this.destructions.delete(container.id),
    );
    this.destructions.set(container.id, destruction);
    return destruction;
  }

  private async tearDown(container: Container): Promise<void> {
    const diedOnItsOwn = !container.alive;
    container.state = 'removed';
    this.stopIdleTimer(container);
    container.idleConnection?.destroy();
    container.idleConnection = null;
    if (diedOnItsOwn) this.reportState(container, ContainerState.CONTAINER_STATE_ERROR);
    const log = this.options.log.child({ containerId: container.id });
    try {
      if (container.alive) {
        try {
          process.kill(container.process.pid, 'SIGKILL');
        } catch {
          // gone already
        }
      }
      await container.cgroup.killAll();
      await Promise.race([
        container.process.exited,
        new Promise((resolve) => setTimeout(resolve, DESTROY_WAIT_MS).unref()),
      ]);
      container.egress?.stop();
      await container.cgroup.remove();
      // Only now can nothing run as its uid any more: the uid may go to another container.
      await container.giveBackIdentity();
    } catch (error) {
      log.warn({ err: (error as Error).message }, 'container cleanup was incomplete');
    } finally {
      await rm(container.paths.dir, { recursive: true, force: true }).catch(() => undefined);
      this.containers.delete(container.id);
      this.reportState(container, ContainerState.CONTAINER_STATE_REMOVED);
      log.debug({ checkpointId: container.checkpointId }, 'container removed');
      // A slot is free again: standbys may fill it.
      if (!this.closing && container.reported) this.standbys.refresh();
    }
  }

  private onExit(container: Container): void {
    if (container.state === 'standby') {
      this.options.log.warn(
        { containerId: container.id, exit: container.exit },
        'a standby container died',
      );
      this.standbys.remove(container);
      void this.destroy(container);
      return;
    }
    if (container.state === 'ready') {
      this.options.log.warn(
        { containerId: container.id, exit: container.exit },
        'an idle container died',
      );
      void this.destroy(container);
    }
    // A busy container's call sees its connection drop and releases it.
  }

  /** The GPU memory budgets of the calls its containers hold, in bytes. */
  gpuMemoryHeld(): number {
    let held = 0;
    for (const container of this.containers.values()) held += container.gpuMemory;
    return held;
  }

  /** Memory used by all containers, standbys included, in bytes. */
  async memoryUsed(): Promise<number> {
    const all = [...this.list(), ...this.standbys.all()];
    const usages = await Promise.all(
      all.map((container) => container.cgroup.usage().catch(() => 0)),
    );
    return usages.reduce((sum, usage) => sum + usage, 0);
  }

  /**
   * From now on, a session container idle for EXECUTOR_TTL is destroyed (and reported removed),
   * at that age exactly: each idle container has its own timer, started when its call ends.
   */
  startReaper(): void {
    this.reaping = true;
    for (const container of this.list()) {
      if (container.state === 'ready') this.startIdleTimer(container);
    }
    // Standbys follow demand down too: those above it go, once it is forgotten.
    this.trimTimer ??= setInterval(
      () => this.trimStandbys(),
      this.options.standbyTrimMs ?? STANDBY_TRIM_MS,
    );
    this.trimTimer.unref();
  }

  private startIdleTimer(container: Container): void {
    if (!this.reaping || container.idleTimer !== null) return;
    container.idleTimer = setTimeout(
      () => {
        container.idleTimer = null;
        if (!expiresIdle(container.state)) return;
        this.options.log.info(
          { containerId: container.id },
          'idle container expired (EXECUTOR_TTL)',
        );
        void this.destroy(container);
      },
      idleExpiresIn(container.lastUsedAt, this.clock(), this.options.idleTtlMs),
    );
    container.idleTimer.unref();
  }

  private stopIdleTimer(container: Container): void {
    if (container.idleTimer !== null) clearTimeout(container.idleTimer);
    container.idleTimer = null;
  }

  /** Resolves once the destructions and standby restores under way now have finished. */
  async settled(): Promise<void> {
    await this.standbys.settled();
    await Promise.all([...this.destructions.values()]);
  }

  /** Destroys every container and standby, waiting for destructions already under way. */
  async close(): Promise<void> {
    this.closing = true;
    if (this.trimTimer !== null) clearInterval(this.trimTimer);
    this.trimTimer = null;
    this.closed.abort(new ShuttingDownError('the worker is shutting down'));
    this.reaping = false;
    for (const container of this.list()) this.stopIdleTimer(container);
    await Promise.allSettled([...this.creations]);
    const standbys = await this.standbys.close();
    await Promise.all([...this.list(), ...standbys].map((container) => this.destroy(container)));
    await Promise.all([...this.destructions.values()]);
  }

  private reportState(container: Container, state: ContainerState): void {
    if (state === ContainerState.CONTAINER_STATE_BUSY) container.reported = true;
    if (!container.reported) return;
    this.options.report({
      containerId: container.id,
      state,
      checkpointId: container.checkpointId,
    });
  }
}
