/** The cluster state the log folds into: what placement, the reaper and replay read. */
import type { Catalogue } from '../events/catalogue.js';
import {
  EVENT_SCHEMA_VERSION,
  type ContainerState,
  type EvictionReason,
  type Flavor,
  type SessionExpiryReason,
} from '../events/schema.js';
import { DEFAULT_CONFIG, type Config } from '../shared/config.js';
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

/** A session: its pin (if any), the call that created the pin, and its expiry (if expired). */
export interface SessionRecord {
  readonly sessionId: string;
  readonly pin: SessionPin | null;
  /** The request whose container became the pin; its failure clears the pin. */
  readonly pinnedBy: string | null;
  readonly expired: SessionExpiry | null;
}

/** A placed call's hold on a worker, from `CallPlaced` until released. */
export interface Reservation {
  readonly requestId: string;
  readonly sessionId: string | null;
  readonly workerId: string;
  /** The container the call runs in: named at placement when reused, else once bound. */
  readonly containerId: string | null;
  readonly checkpointId: string | null;
  readonly memory: number;
  readonly since: string;
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
  readonly reservations: ReadonlyMap<string, Reservation>;
  /** Tenants' pinned versions and the workers' residency (docs/tenant-routing.md). */
  readonly routing: RoutingState;
}

/** The state before any event. */
export function initialState(): ClusterState {
  return {
    schemaVersion: EVENT_SCHEMA_VERSION,
    lastSeq: 0,
    config: { ...DEFAULT_CONFIG },
    routerVersion: null,
    rulesVersion: null,
    routerStartedAt: null,
    catalogue: null,
    workers: new Map(),
    sessions: new Map(),
    reservations: new Map(),
    routing: initialRouting(),
  };
}
