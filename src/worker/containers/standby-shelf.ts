/**
 * Standby containers: per held checkpoint, containers restored ahead of demand, already in their
 * sandbox and answering, so a call that names the checkpoint skips the fork, the cgroup
 * migration and the sandbox setup. How many: `--standby` at least, and as many as the recent
 * demand for new containers of the checkpoint asks (`standby-demand.ts`, up to `--standby-max`). They are not reported to the router until a call takes one,
 * and they fill only container slots no call holds (`room`): a call that needs the slot of one
 * makes it give the slot up (`giveUpOne`). Which checkpoints keep standbys, how many to restore
 * and which one gives its slot up are the worker core's rules (src/worker/core/containers); the
 * shelf holds the containers and restores them.
 */
import type { Logger } from 'pino';
import {
  demandAfterStart,
  demandAt,
  keepsStandbys,
  NO_DEMAND,
  shelvesRestored,
  standbyGivingUp,
  standbyRefresh,
  standbysAboveTarget,
  standbysToRestore,
  standbyTarget,
  type StandbyDemand,
  type StandbyDemandPolicy,
  type StandbyShelfState,
} from '../core/containers/index.js';
import type { ExecutorConnection } from '../executor-link/index.js';
import type { Container } from './container.js';

/** What a standby uses until one is measured: a restored interpreter's private memory, rounded up. */
const FIRST_STANDBY_MEMORY = 64 * 1024 * 1024;

/** What the shelf needs from the pool. */
export interface StandbyShelfOptions {
  /** Standbys kept per held checkpoint at least (`--standby`); 0 turns standbys off. */
  readonly perCheckpoint: number;
  /** How many more demand keeps (`--standby-max`, and the spans it is counted over). */
  readonly demand: Omit<StandbyDemandPolicy, 'floor'>;
  /** The worker's clock (epoch ms): demand is counted by it. */
  readonly clock: () => number;
  /** A standby's memory limit until a call takes it (DEFAULT_MEMORY). */
  readonly memory: number;
  /** The checkpoints that can be restored now. */
  readonly held: () => readonly string[];
  /** How many more standbys fit in the container slots no call holds (may be Infinity). */
  readonly room: () => number;
  /**
   * Restores a container from a checkpoint and dials it until its HELLO (no cold fallback): a
   * standby is ready only once its executor answers, and the call that takes it starts on this
   * open connection.
   */
  readonly restore: (
    memory: number,
    checkpointId: string,
  ) => Promise<{ readonly container: Container; readonly connection: ExecutorConnection }>;
  readonly destroy: (container: Container) => Promise<void>;
  readonly log: Logger;
}

/** The standby containers of a pool. */
export class StandbyShelf {
  private readonly shelves = new Map<string, Container[]>();
  private readonly preparing = new Map<string, number>();
  private readonly preparations = new Set<Promise<void>>();
  /** Checkpoints whose standbys were dropped (their resident tier): not restocked. */
  private readonly dropped = new Set<string>();
  private closed = false;
  /** When calls started new containers of each checkpoint, recently. */
  private demand: StandbyDemand = NO_DEMAND;
  /**
   * Calls waiting for a standby of each checkpoint that is still being restored: each restore
   * serves the first waiting call, so a call never restores a container of its own beside one
   * already under way for it (two restores where one does).
   */
  private readonly claims = new Map<string, ((standby: Container | null) => void)[]>();
  /** What one standby uses (bytes): the most a shelved one was measured to use. */
  memoryPerStandby = FIRST_STANDBY_MEMORY;

  constructor(private readonly options: StandbyShelfOptions) {}

  private get policy(): StandbyDemandPolicy {
    return { ...this.options.demand, floor: this.options.perCheckpoint };
  }

  /** How many ready standbys of `checkpointId` the worker keeps now (demand's target, before room). */
  target(checkpointId: string): number {
    return standbyTarget(this.demand, checkpointId, this.options.clock(), this.policy);
  }

  /** A call started a new container of `checkpointId`: demand for standbys of it rises. */
  started(checkpointId: string): void {
    this.demand = demandAfterStart(this.demand, checkpointId, this.options.clock(), this.policy);
  }

  /** The ready standbys per checkpoint (for the load report: the router shows them in `replay explain`). */
  readyCounts(): { checkpointId: string; ready: number }[] {
    return [...this.shelves]
      .filter(([, shelf]) => shelf.length > 0)
      .map(([checkpointId, shelf]) => ({ checkpointId, ready: shelf.length }))
      .sort((a, b) => (a.checkpointId < b.checkpointId ? -1 : 1));
  }

  /**
   * Forgets demand older than its window and destroys the shelved standbys above each
   * checkpoint's target (the oldest first); restocks those below it.
   */
  trim(): void {
    const now = this.options.clock();
    this.demand = demandAt(this.demand, now, this.policy);
    for (const [checkpointId, shelf] of this.shelves) {
      const above = standbysAboveTarget(shelf.length, this.target(checkpointId));
      for (const standby of shelf.splice(0, above)) {
        this.options.log.debug(
          { checkpointId, containerId: standby.id },
          'a standby goes: demand for it fell',
        );
        void this.options.destroy(standby);
      }
    }
    this.refresh();
  }

  /** What the standby rules read of the shelf now. */
  private get state(): StandbyShelfState {
    return {
      perCheckpoint: this.options.perCheckpoint,
      held: this.options.held(),
      dropped: this.dropped,
      closed: this.closed,
    };
  }

  /** Every standby now on the shelf. */
  all(): Container[] {
    return [...this.shelves.values()].flat();
  }

  /** The standbys of one checkpoint. */
  count(checkpointId: string): number {
    return this.shelves.get(checkpointId)?.length ?? 0;
  }

  /** Standbys on the shelf and being restored: the container slots they fill. */
  get size(): number {
    let size = 0;
    for (const shelf of this.shelves.values()) size += shelf.length;
    for (const preparing of this.preparing.values()) size += preparing;
    return size;
  }

  /**
   * Frees a slot for a call of `keep`: none when the call takes a standby of its own checkpoint,
   * else the oldest standby of the first other checkpoint that has one is destroyed (those still
   * being restored finish first).
   */
  giveUpOne(keep: string): void {
    const shelved = new Map(Array.from(this.shelves, ([id, shelf]) => [id, shelf.length]));
    // A standby of its own being restored, unclaimed, is the call's: nothing needs to give up.
    shelved.set(keep, this.available(keep));
    const checkpointId = standbyGivingUp(shelved, keep);
    if (checkpointId === null) return;
    const shelf = this.shelves.get(checkpointId) ?? [];
    const standby = shelf.shift();
    if (!standby) return;
    if (shelf.length === 0) this.shelves.delete(checkpointId);
    this.options.log.debug(
      { checkpointId, containerId: standby.id },
      'a standby gives its slot up to a call',
    );
    void this.options.destroy(standby);
  }

  /** Standbys of `checkpointId` a call could take: on the shelf, or being restored unclaimed. */
  available(checkpointId: string): number {
    const preparing = this.preparing.get(checkpointId) ?? 0;
    const claimed = this.claims.get(checkpointId)?.length ?? 0;
    return this.count(checkpointId) + Math.max(0, preparing - claimed);
  }

  /**
   * A live standby of `checkpointId` with its limit set to `memory` and the connection that read
   * its HELLO: one on the shelf, else one being restored (waited for), else null; then restocks.
   * `signal` gives up waiting.
   */
  async take(
    checkpointId: string,
    memory: number,
    signal?: AbortSignal,
  ): Promise<{ readonly container: Container; readonly connection: ExecutorConnection } | null> {
    const shelf = this.shelves.get(checkpointId) ?? [];
    for (;;) {
      let standby = shelf.shift();
      if (!standby && this.available(checkpointId) > 0) {
        standby = (await this.claim(checkpointId, signal)) ?? undefined;
      }
      if (!standby) return null;
      if (!standby.alive || standby.state !== 'standby') continue;
      const connection = standby.idleConnection;
      standby.idleConnection = null;
      try {
        if (!connection?.usable) throw new Error('its executor connection closed');
        await standby.cgroup.setLimit(memory);
      } catch {
        connection?.destroy();
        void this.options.destroy(standby);
        continue;
      }
      this.restock(checkpointId);
      return { container: standby, connection };
    }
  }

  /** Waits for a standby of `checkpointId` being restored: it, or null when that restore failed. */
  private claim(checkpointId: string, signal?: AbortSignal): Promise<Container | null> {
    return new Promise((resolve) => {
      const waiting = this.claims.get(checkpointId) ?? [];
      const serve = (standby: Container | null) => {
        signal?.removeEventListener('abort', abandon);
        resolve(standby);
      };
      const abandon = () => {
        const index = waiting.indexOf(serve);
        if (index >= 0) waiting.splice(index, 1);
        resolve(null);
      };
      if (signal?.aborted) return resolve(null);
      signal?.addEventListener('abort', abandon, { once: true });
      waiting.push(serve);
      this.claims.set(checkpointId, waiting);
    });
  }

  /** The first call waiting for a standby of `checkpointId`, taken off the list. */
  private nextClaim(checkpointId: string): ((standby: Container | null) => void) | undefined {
    const waiting = this.claims.get(checkpointId);
    const claim = waiting?.shift();
    if (waiting?.length === 0) this.claims.delete(checkpointId);
    return claim;
  }

  /** Whether standbys of `checkpointId` are kept (it is held, standbys are on, not dropped). */
  keeps(checkpointId: string): boolean {
    return keepsStandbys(this.state, checkpointId);
  }

  /** Destroys the standbys of `checkpointId` and keeps none until `keep` is called. */
  drop(checkpointId: string): void {
    this.dropped.add(checkpointId);
    const shelf = this.shelves.get(checkpointId) ?? [];
    this.shelves.delete(checkpointId);
    for (const standby of shelf) void this.options.destroy(standby);
  }

  /** Keeps standbys of `checkpointId` again (after `drop`), restoring them in the background. */
  keep(checkpointId: string): void {
    this.dropped.delete(checkpointId);
    this.restock(checkpointId);
  }

  /** Restores standbys of `checkpointId` in the background, up to the configured count. */
  restock(checkpointId: string): void {
    const have = this.count(checkpointId) + (this.preparing.get(checkpointId) ?? 0);
    const restores = standbysToRestore(
      this.state,
      checkpointId,
      have,
      this.options.room(),
      this.target(checkpointId),
    );
    for (let i = 0; i < restores; i += 1) {
      this.preparing.set(checkpointId, (this.preparing.get(checkpointId) ?? 0) + 1);
      const preparation = new Promise<void>((resolve) => setImmediate(resolve))
        .then(() => this.prepare(checkpointId))
        .finally(() => this.preparations.delete(preparation));
      this.preparations.add(preparation);
    }
  }

  private async prepare(checkpointId: string): Promise<void> {
    try {
      const { container, connection } = await this.options.restore(
        this.options.memory,
        checkpointId,
      );
      container.state = 'standby';
      container.idleConnection = connection;
      if (!container.alive) {
        this.nextClaim(checkpointId)?.(null);
        void this.options.destroy(container);
        return;
      }
      // A call waits for it: it is that call's (its slot is the call's own).
      const claim = this.nextClaim(checkpointId);
      if (claim) return claim(container);
      // Past the slots (a call took the slot it filled while it was restored): it goes.
      if (!shelvesRestored(this.state, checkpointId) || this.options.room() < 0) {
        void this.options.destroy(container);
        return;
      }
      const shelf = this.shelves.get(checkpointId) ?? [];
      shelf.push(container);
      this.shelves.set(checkpointId, shelf);
      // Measured without waiting: on the shelf, it is no longer being restored (awaited here,
      // it would count twice, on the shelf and being restored, until the measurement came).
      void container.cgroup
        .usage()
        .then((used) => {
          if (used > this.memoryPerStandby) this.memoryPerStandby = used;
        })
        .catch(() => undefined);
    } catch (error) {
      this.nextClaim(checkpointId)?.(null);
      this.options.log.warn(
        { checkpointId, err: (error as Error).message },
        'could not restore a standby container; calls restore on demand',
      );
    } finally {
      this.preparing.set(checkpointId, (this.preparing.get(checkpointId) ?? 1) - 1);
    }
  }

  /** Drops standbys of checkpoints no longer held, and restocks those that are. */
  refresh(): void {
    const { drop, restock } = standbyRefresh(this.state, this.shelves.keys());
    for (const checkpointId of drop) {
      const shelf = this.shelves.get(checkpointId) ?? [];
      this.shelves.delete(checkpointId);
      for (const standby of shelf) void this.options.destroy(standby);
    }
    for (const checkpointId of restock) this.restock(checkpointId);
  }

  /** Takes a standby that died off the shelf. */
  remove(container: Container): void {
    const shelf = this.shelves.get(container.checkpointId) ?? [];
    this.shelves.set(
      container.checkpointId,
      shelf.filter((standby) => standby !== container),
    );
  }

  /** Resolves once the restores under way now have finished. */
  async settled(): Promise<void> {
    await Promise.all([...this.preparations]);
  }

  /** Stops restocking; resolves with every standby, for the pool to destroy. */
  async close(): Promise<Container[]> {
    this.closed = true;
    await this.settled();
    const all = this.all();
    this.shelves.clear();
    return all;
  }
}
