/** The cluster state the log folds into: what placement, the reaper and replay read. */
import type { Catalogue } from '../events/catalogue.js';
import type { Demand } from '../events/types.js';
import type {
  ContainerState,
  EvictionReason,
  Flavor,
  SessionExpiryReason,
} from '../events/schema.js';
import { DEFAULT_CONFIG, type Config } from '../shared/config.js';
import { emptyAdmissionIndex, type AdmissionIndex } from './admission-state.js';
import { initialImageHoldings, type ImageHoldings, type ImageKeyIndex } from './image-holdings.js';
import { initialQuotas, type QuotaTable } from './quota-state.js';
import { initialRouting, type RoutingState } from './routing-state.js';

/** A worker's lifecycle as the router knows it: placeable only when `ready` (with an address). */
export const WORKER_STATUSES = ['ready', 'error', 'leaving', 'evicted'] as const;
/** A worker's lifecycle. */
export type WorkerStatus = (typeof WORKER_STATUSES)[number];

/** A worker's last load report. */
export interface Utilization {
  readonly memoryUsed: number;
  readonly containerCount: number;
  readonly cpuUsed: number | null;
  readonly cpuTotal: number | null;
  readonly gpuMemoryUsed: number | null;
  readonly at: string;
  /**
   * Its ready standbys per checkpoint, as its last load report listed them (null: it listed none,
   * or a log from before reports carried them). Placement does not read them; `replay explain`
   * shows them for the chosen worker.
   */
  readonly standbys?: { checkpointId: string; ready: number }[] | null;
}

/** The states of a container record: what a worker reported, short of `removed`. */
export const CONTAINER_RECORD_STATES = [
  'busy',
  'ready',
  'error',
] as const satisfies readonly ContainerState[];

/** A container a worker reported (removed containers are dropped). */
export interface ContainerRecord {
  readonly containerId: string;
  readonly state: (typeof CONTAINER_RECORD_STATES)[number];
  /** The checkpoint it was restored from; null for a cold start. */
  readonly checkpointId: string | null;
  /** When it entered its current state. */
  readonly since: string;
  /**
   * The worker's report sequence number of the last report that told of it (null: a report that
   * carried none). A full report older than this never drops or changes the record.
   */
  readonly reportSeq: number | null;
}

/**
 * A container made or used for a session's call (rules 7 on): the worker may keep it for its
 * session, so it holds a slot, with no call in it, until the worker reports it gone.
 */
export interface SessionContainer {
  /** The session whose call made or used it. */
  readonly sessionId: string;
  /**
   * A full report left it out while the worker had reported nothing of it (the report may have
   * been taken before the container was made); the next full report that leaves it out drops it.
   */
  readonly unlisted: boolean;
}

/** A worker as the router knows it. */
export interface WorkerRecord {
  readonly workerId: string;
  readonly address: string | null;
  readonly status: WorkerStatus;
  readonly error: string | null;
  readonly flavor: Flavor;
  readonly memoryTotal: number | null;
  readonly maxContainers: number | null;
  readonly gpuMemoryTotal: number | null;
  /**
   * The worker process that registered (new at each start of the worker); null when its
   * registration named none. Another live instance may not take the worker's ID.
   */
  readonly instanceId: string | null;
  readonly utilization: Utilization | null;
  /** Sum of the memory budgets of calls placed here and not yet finished. */
  readonly reservedMemory: number;
  /** Calls placed here and not yet finished. */
  readonly inFlight: number;
  readonly probeFailures: number;
  readonly registeredAt: string;
  readonly lastHeardAt: string;
  readonly evictedReason: EvictionReason | null;
  /** Its containers by ID; `containers.size` is how many it holds. */
  readonly containers: ReadonlyMap<string, ContainerRecord>;
  /** Which session is pinned to which of this worker's containers (container ID to session ID). */
  readonly pinnedSessions: ReadonlyMap<string, string>;
  /**
   * The containers calls in flight run in (container ID to the request IDs, sorted): a reused
   * container from placement, a new one once the call is bound. Derived from the reservations, so
   * a snapshot folds like the events it stands for. The router runs one call in a container at a
   * time; only a log it did not write holds two, and then they are both kept, in no event's order.
   */
  readonly callContainers: ReadonlyMap<string, readonly string[]>;
  /**
   * The containers made or used for a session's call (rules 7 on; empty under earlier rules), by
   * container ID: each holds a slot until its worker reports it `removed` or `error` (or a full
   * report drops it, the reaper forgets it, the worker is evicted or restarts), reported or not,
   * whether its session ended or not, since the worker keeps a session's container after a call
   * that succeeded until told to destroy it (docs/cluster-state.md, "Container slots").
   */
  readonly sessionContainers: ReadonlyMap<string, SessionContainer>;
  /**
   * Containers that hold a slot with no call in flight in them: `ready` records, records kept for
   * a pinned session, and session containers (`sessionContainers`) not reported gone. Derived,
   * kept by the fold; the container-count filter reads it.
   */
  readonly idleContainers: number;
  /**
   * The worker's own count of the slots it holds, from its last load report that listed no
   * containers (`containerCount`), moved by what the router learned since: +1 for each call placed
   * in a new container, -1 for each one released that its worker does not keep and for each idle
   * container removed. Null after a report that listed its containers (their records are then
   * the worker's word) or before any report.
   */
  readonly reportedSlots: number | null;
  /** The `reportSeq` of the last full report folded (null: none); an older one is stale. */
  readonly lastFullReportSeq: number | null;
}

/** Where a session lives. */
export interface SessionPin {
  readonly workerId: string;
  readonly containerId: string;
  /** The checkpoint its container was restored from; null for a cold start. */
  readonly checkpointId: string | null;
}

/** Why a session can no longer be used, and since when. */
export interface SessionExpiry {
  readonly reason: SessionExpiryReason;
  readonly at: string;
  readonly seq: number;
}

/**
 * A session: its owner, its pin (if any), the call that created the pin, and its expiry (if
 * expired). The record is made by the session's first placed call (`CallPlaced`).
 */
export interface SessionRecord {
  readonly sessionId: string;
  /**
   * The tenant that owns it: the tenant of its first placed call (`CallRequested.tenantId`); null
   * for a session of a call without a tenant. Only calls of this tenant may use or end it.
   */
  readonly tenantId: string | null;
  readonly pin: SessionPin | null;
  /** The request whose container became the pin; its failure clears the pin. */
  readonly pinnedBy: string | null;
  readonly expired: SessionExpiry | null;
}

/** A placed call's hold on a worker, from `CallPlaced` until released. */
export interface Reservation {
  readonly requestId: string;
  readonly sessionId: string | null;
  /** The tenant of the call (`CallRequested.tenantId`); null without one. */
  readonly tenantId: string | null;
  readonly workerId: string;
  /** The container the call runs in: named at placement when reused, else once bound. */
  readonly containerId: string | null;
  readonly checkpointId: string | null;
  readonly memory: number;
  readonly since: string;
  /** Workers earlier attempts of this call could not reach (a failed dial): never tried again. */
  readonly unreachable: readonly string[];
}

/** A call requested and waiting for its placement (its first, or again after a failed dial). */
export interface PendingCall {
  readonly requestId: string;
  /** Its session, as requested: what a `CallPlaced` that records none is placed for. */
  readonly sessionId: string | null;
  /** The tenant of the call (`CallRequested.tenantId`); null without one. */
  readonly tenantId: string | null;
  /** The memory budget, bytes: what a `CallPlaced` that records no `memory` reserves. */
  readonly memory: number;
  /** Workers earlier attempts of this call could not reach: placement leaves them out. */
  readonly unreachable: readonly string[];
  /** What its caller's deadline left it as requested, ms (`CallRequested.deadlineMs`); absent: none. */
  readonly deadlineMs?: number | null;
  /** The key of its image declaration (`CallRequested.imageKey`); absent: it names no image. */
  readonly imageKey?: string;
}

/**
 * A call waiting in the admission queue (docs/placement.md, "The admission queue"), from its
 * `CallQueued` until it is admitted or leaves: what placing it again needs, and its place.
 */
export interface QueuedCall {
  readonly requestId: string;
  readonly sessionId: string | null;
  /** The tenant of the call; null without one (such calls queue as one tenant, ``). */
  readonly tenantId: string | null;
  /** The demand exactly as the client sent it. */
  readonly demand: Demand;
  readonly retryOf: string | null;
  /** The seq of its `CallQueued`: first come, first served within a tenant. */
  readonly seq: number;
  /** When it was queued (its `CallQueued`'s `at`). */
  readonly at: string;
  /**
   * For a pinned call of a tenant: the revision of its tenant's table entry in force when it was
   * queued (absent: not pinned, or no entry). Rules 9 admit it by that entry's version.
   */
  readonly revision?: number;
  /** What its caller's deadline left it as requested, ms (absent: no deadline). */
  readonly deadlineMs?: number;
  /**
   * The key of its image declaration as requested (absent: none): rules 8 admit it to a worker
   * that holds the image, as they would have placed it at its request.
   */
  readonly imageKey?: string;
}

/** The catalogue in force and its revision. */
export interface CatalogueInForce {
  readonly revision: string;
  readonly catalogue: Catalogue;
}

/**
 * The whole folded state of the cluster. Collections are Maps: placement walks every worker for
 * every call, and iterating a Map is several times faster than iterating a large plain object.
 * Snapshots carry the same state as plain JSON (see `snapshot.ts`).
 */
export interface ClusterState {
  /**
   * The event schema of the events being folded: what the last `RouterStarted` recorded (1 for a
   * log that never says). Below 2 a fold reads each event with the consequences a v1 fold applied
   * with it (`src/events/upcast.ts`).
   */
  readonly schemaVersion: number;
  /** The seq of the last event folded (0 before any). */
  readonly lastSeq: number;
  readonly config: Config;
  readonly routerVersion: string | null;
  /** The placement rules' version the last `RouterStarted` recorded (null: it recorded none). */
  readonly rulesVersion: number | null;
  /**
   * When the router last started (the last `RouterStarted`'s `at`). Liveness counts a worker's
   * silence from no earlier than this, so a router that was down does not evict every worker.
   */
  readonly routerStartedAt: string | null;
  readonly catalogue: CatalogueInForce | null;
  readonly workers: ReadonlyMap<string, WorkerRecord>;
  readonly sessions: ReadonlyMap<string, SessionRecord>;
  /**
   * The ended and expired sessions, in the order they ended: session ID to when (epoch ms). Each
   * is forgotten `SESSION_RETENTION` after it ended (`forget.ts`). Derived from the records, so a
   * snapshot does not carry it.
   */
  readonly sessionExpiries: ReadonlyMap<string, number>;
  readonly reservations: ReadonlyMap<string, Reservation>;
  /** Calls requested and not yet placed or refused, by request ID (usually none between appends). */
  readonly pendingCalls: ReadonlyMap<string, PendingCall>;
  /**
   * The admission queue: calls that did not fit when requested, by request ID, in the order
   * they were queued (each also pending until admitted or gone).
   */
  readonly queue: ReadonlyMap<string, QueuedCall>;
  /**
   * Each tenant's queued calls in order and the slots each holds, kept by the fold
   * (`admission-index.ts`). Derived from the queue, the reservations and the sessions, so a
   * snapshot does not carry it.
   */
  readonly admission: AdmissionIndex;
  /** Tenants' pinned versions and the workers' residency (docs/tenant-routing.md). */
  readonly routing: RoutingState;
  /** Tenants' quotas: weights, slot caps, queue caps (docs/quotas.md). */
  readonly quotas: QuotaTable;
  /** Tenants' images on each worker, as the workers reported them (docs/images.md). */
  readonly images: ImageHoldings;
  /** Which workers hold an image of each declaration key: derived from `images`, kept with it. */
  readonly imageKeys: ImageKeyIndex;
}

/** The state before any event. */
export function initialState(): ClusterState {
  return {
    schemaVersion: 1,
    lastSeq: 0,
    config: { ...DEFAULT_CONFIG },
    routerVersion: null,
    rulesVersion: null,
    routerStartedAt: null,
    catalogue: null,
    workers: new Map(),
    sessions: new Map(),
    sessionExpiries: new Map(),
    reservations: new Map(),
    pendingCalls: new Map(),
    queue: new Map(),
    admission: emptyAdmissionIndex(),
    routing: initialRouting(),
    quotas: initialQuotas(),
    images: initialImageHoldings(),
    imageKeys: new Map(),
  };
}
