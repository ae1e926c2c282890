/**
 * Leadership of a JetStream log: a lease in a JetStream key-value bucket (`STREAM-leader`, key
 * `leader`), its value the holder's router ID and address. The leader renews it every third of
 * `LEADER_LEASE` with a compare-and-set on the revision it last wrote; a standby reads it every
 * tenth and takes it over (compare-and-set on the revision it saw) once that revision has not
 * changed for a whole `LEADER_LEASE` by its own clock. A leader that could not renew for
 * 0.9 x `LEADER_LEASE` since it sent its last successful renewal gives the lease up on its own,
 * before any standby can count it expired; one whose renewal is refused has been replaced. The
 * log's fencing (each append expects the last message) keeps the log whole whatever the clocks do.
 */
import type { NatsConnection } from '@nats-io/transport-node';
import { Kvm, type KV } from '@nats-io/kv';
import { waitForCluster, type ClusterWaitOptions } from '../../events/index.js';

const KEY = 'leader';

/** Who holds (or held) the lease. */
export interface LeaseHolder {
  readonly routerId: string;
  /** The address workers and clients reach it at. */
  readonly address: string;
}

/** The lease as last read. */
interface Observed {
  readonly holder: LeaseHolder | undefined;
  readonly revision: number;
  readonly seenAt: number;
}

/** How a lease runs. */
export interface LeaseOptions {
  readonly connection: NatsConnection;
  readonly bucket: string;
  readonly replicas: number;
  readonly leaseMs: number;
  readonly me: LeaseHolder;
  readonly clock: () => number;
  /** Told when this router won the lease; `previous` held it before (undefined: nobody). */
  readonly onLeading: (previous: LeaseHolder | undefined, revision: number) => void;
  /** Told when this router lost or gave up the lease, with why. */
  readonly onLost: (why: string) => void;
  /**
   * Told, at most once a `leaseMs`, why a standby could not read the lease or take an expired
   * one (the bucket unreachable, another router's write first): a standby that never leads says
   * why.
   */
  readonly onContendFailed?: (why: string) => void;
  /**
   * How `open` waits for a cluster still electing the bucket's leader (default: no retry), as in
   * `waitForCluster`.
   */
  readonly wait?: Omit<ClusterWaitOptions, 'what'>;
}

/** One router's side of the lease. */
export class LeaderLease {
  private observed: Observed | undefined;
  private revision = 0;
  private renewedSentAt = 0;
  private leading = false;
  private timer: NodeJS.Timeout | undefined;
  private watchdog: NodeJS.Timeout | undefined;
  private busy = false;
  private stopped = false;
  /** When a failed contention was last told (`onContendFailed`). */
  private failureToldAt = Number.NEGATIVE_INFINITY;

  private constructor(
    private readonly kv: KV,
    private readonly options: LeaseOptions,
  ) {}

  /**
   * Opens (creating) the bucket, retrying while the cluster elects its leader (`wait`); `start`
   * begins contending.
   */
  static async open(options: LeaseOptions): Promise<LeaderLease> {
    const create = () =>
      new Kvm(options.connection).create(options.bucket, {
        replicas: options.replicas,
        history: 1,
      });
    const kv = options.wait
      ? await waitForCluster(create, {
          ...options.wait,
          what: `open the leader lease (bucket ${options.bucket})`,
        })
      : await create();
    return new LeaderLease(kv, options);
  }

  /** The holder as last read (this router once it leads). */
  get holder(): LeaseHolder | undefined {
    return this.leading ? this.options.me : this.observed?.holder;
  }

  /** Whether this router holds the lease. */
  get isLeader(): boolean {
    return this.leading;
  }

  /** Starts watching (a standby) and renewing (once leading). */
  start(): void {
    const tick = () => {
      if (this.stopped) return;
      void this.step().finally(() => {
        if (!this.stopped) this.timer = setTimeout(tick, this.interval());
      });
    };
    tick();
    // A renewal stuck on a partitioned connection must not keep a leader serving past its lease.
    this.watchdog = setInterval(
      () => {
        const since = this.options.clock() - this.renewedSentAt;
        if (this.leading && since >= this.options.leaseMs * 0.9) {
          this.lose(`the lease could not be renewed for ${since} ms`);
        }
      },
      Math.max(20, Math.floor(this.options.leaseMs / 20)),
    );
  }

  /** Stops; a leader deletes its lease so a standby need not wait it out. */
  async stop(release: boolean): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    clearInterval(this.watchdog);
    if (release && this.leading) {
      this.leading = false;
      await this.kv.delete(KEY, { previousSeq: this.revision }).catch(() => undefined);
    }
    this.leading = false;
  }

  private interval(): number {
    return Math.max(50, Math.floor(this.options.leaseMs / (this.leading ? 3 : 10)));
  }

  private async step(): Promise<void> {
    if (this.busy) return;
    this.busy = true;
    try {
      if (this.leading) await this.renew();
      else await this.contend();
    } finally {
      this.busy = false;
    }
  }

  private async renew(): Promise<void> {
    const { clock, leaseMs } = this.options;
    const sentAt = clock();
    try {
      this.revision = await this.kv.update(KEY, this.value(), this.revision);
      this.renewedSentAt = sentAt;
    } catch (error) {
      const message = (error as Error).message;
      if (/wrong last sequence/i.test(message)) {
        this.lose(`another router took the lease over (${message})`);
        return;
      }
    }
    if (this.leading && clock() - this.renewedSentAt >= leaseMs * 0.9) {
      this.lose(`the lease could not be renewed for ${clock() - this.renewedSentAt} ms`);
    }
  }

  private async contend(): Promise<void> {
    const { clock, leaseMs } = this.options;
    let entry;
    try {
      entry = await this.kv.get(KEY);
    } catch (error) {
      this.contendFailed(`the lease could not be read: ${(error as Error).message}`);
      return;
    }
    const now = clock();
    const live = entry !== null && entry.operation === 'PUT';
    const revision = entry?.revision ?? 0;
    if (!this.observed || this.observed.revision !== revision) {
      this.observed = {
        holder: live ? parseHolder(entry?.string()) : undefined,
        revision,
        seenAt: now,
      };
    }
    const expired = !live || now - this.observed.seenAt >= leaseMs;
    if (!expired) return;
    const previous = this.observed.holder;
    const sentAt = clock();
    try {
      this.revision =
        entry === null
          ? await this.kv.create(KEY, this.value())
          : await this.kv.update(KEY, this.value(), revision);
    } catch (error) {
      // Another standby won, or the bucket is unreachable: read again next time.
      const held = previous ? `held by ${previous.routerId} at ${previous.address}` : 'free';
      this.contendFailed(
        `the lease (revision ${revision}, ${held}) could not be taken: ${(error as Error).message}`,
      );
      return;
    }
    this.renewedSentAt = sentAt;
    this.leading = true;
    this.options.onLeading(previous, this.revision);
  }

  private contendFailed(why: string): void {
    const now = this.options.clock();
    if (now - this.failureToldAt < this.options.leaseMs) return;
    this.failureToldAt = now;
    this.options.onContendFailed?.(why);
  }

  private lose(why: string): void {
    if (!this.leading) return;
    this.leading = false;
    this.stopped = true;
    clearTimeout(this.timer);
    clearInterval(this.watchdog);
    this.options.onLost(why);
  }

  private value(): string {
    return JSON.stringify(this.options.me);
  }
}

function parseHolder(text: string | undefined): LeaseHolder | undefined {
  try {
    const value = JSON.parse(text ?? '') as Partial<LeaseHolder>;
    if (typeof value.routerId === 'string' && typeof value.address === 'string') {
      return { routerId: value.routerId, address: value.address };
    }
  } catch {
    // A value readie did not write: no holder to name.
  }
  return undefined;
}
