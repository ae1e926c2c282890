/**
 * The routing part of the cluster state (docs/tenant-routing.md): the routing table and its
 * revisions, staged pins, versions kept after they stopped being pinned, what each worker reports
 * of the versions it holds (and the cold loads in flight there), what the router told each worker
 * to keep, and the resolutions of tenants' calls that retries and sessions reuse.
 */
import type { ResidencyState } from '../events/schema.js';

/** A tenant's entry in the routing table: the version its pinned calls meet, on `k` workers. */
export interface PinEntry {
  readonly tenantId: string;
  readonly version: string;
  readonly k: number;
  /** The revision of the `RoutingRevised` that set this entry. */
  readonly revision: number;
  /** The version this entry replaced (what a rollback returns to); null for a first pin. */
  readonly previousVersion: string | null;
  /** When the entry came into force. */
  readonly since: string;
}

/** What one `RoutingRevised` set: a call's resolution names it by its revision. */
export interface RevisionRecord {
  readonly tenantId: string;
  /** Null: the pin was removed. */
  readonly version: string | null;
  readonly k: number | null;
  readonly at: string;
}

/** A pin being prepared: the subset it hashes to is asked to pre-warm it. */
export interface StagedPin {
  readonly tenantId: string;
  readonly version: string;
  readonly k: number;
  /** The subset it hashed to when staged. */
  readonly targetWorkers: string[];
  readonly since: string;
}

/** A version that stopped being a tenant's pin: protected until `since` + `PIN_RETENTION`. */
export interface RetainedVersion {
  readonly tenantId: string;
  readonly version: string;
  readonly k: number;
  /** When it stopped being pinned. */
  readonly since: string;
}

/** A worker's last report about one version. */
export interface Residency {
  readonly state: ResidencyState;
  readonly error: string | null;
  readonly since: string;
  /**
   * How long its last load of the version took, ms: from a `loading` report to the `resident`
   * report that followed it (both the log's instants); null: no load of it measured there yet.
   * Kept across later reports (an evicted version keeps what loading it cost). Absent (as null)
   * in a state restored from a snapshot written before loads were measured.
   */
  readonly loadMs?: number | null;
}

/**
 * A cold load in flight on a worker: a call placed with `coldLoad` (its request), or a `loading`
 * report (request null), until what resolves it (docs/tenant-routing.md).
 */
export interface ColdLoad {
  readonly requestId: string | null;
  readonly checkpointId: string;
  readonly since: string;
}

/** What the router knows of one worker's versions. */
export interface WorkerResidency {
  /** Its reports, by checkpoint ID. */
  readonly versions: ReadonlyMap<string, Residency>;
  /** Cold loads in flight there, oldest first. */
  readonly loads: ColdLoad[];
  /** The versions the router last told it to keep (`ResidencyProtected`); null: none told yet. */
  readonly protectedIds: string[] | null;
  /** Its resident budget in bytes, as it reported it; null: not reported (or no limit). */
  readonly residentMemory: number | null;
}

/** A tenant's call, kept so that a retry naming it reuses its resolution. */
export interface TenantCall {
  readonly tenantId: string;
  /** The revision it resolved to; null: it was not resolved (not pinned, or refused before). */
  readonly revision: number | null;
  /** When it was requested (or last kept, for a call still running past `PIN_RETENTION`). */
  readonly at: string;
}

/** A session's resolution: the one of its first placed pinned call. */
export interface SessionResolution {
  readonly tenantId: string;
  readonly revision: number;
}

/** The routing part of the state. */
export interface RoutingState {
  /** The revision of the last `RoutingRevised` (0 before any). */
  readonly revision: number;
  /** The table, by tenant. */
  readonly entries: ReadonlyMap<string, PinEntry>;
  /** Every revision, by its number as text. */
  readonly revisions: ReadonlyMap<string, RevisionRecord>;
  /** Staged pins, by tenant. */
  readonly staged: ReadonlyMap<string, StagedPin>;
  /** Versions no longer pinned, by `retainedKey`, until `PIN_RETENTION` passes. */
  readonly retained: ReadonlyMap<string, RetainedVersion>;
  /** Per worker, by worker ID. */
  readonly workers: ReadonlyMap<string, WorkerResidency>;
  /** Tenants' calls by request ID, oldest first, for `PIN_RETENTION` (longer while running). */
  readonly calls: ReadonlyMap<string, TenantCall>;
  /** Sessions' resolutions, by session ID, until the session expires. */
  readonly sessions: ReadonlyMap<string, SessionResolution>;
}

/** The routing state before any event. */
export function initialRouting(): RoutingState {
  return {
    revision: 0,
    entries: new Map(),
    revisions: new Map(),
    staged: new Map(),
    retained: new Map(),
    workers: new Map(),
    calls: new Map(),
    sessions: new Map(),
  };
}

/** The key of a retained version. */
export function retainedKey(tenantId: string, version: string): string {
  return `${tenantId}\n${version}`;
}

/** Whether `workerId` reports `version` resident: whether it *holds* the version. */
export function holdsVersion(routing: RoutingState, workerId: string, version: string): boolean {
  return routing.workers.get(workerId)?.versions.get(version)?.state === 'resident';
}

/** Whether a cold load (of any version) is in flight on `workerId`: one per worker. */
export function hasColdLoadInFlight(routing: RoutingState, workerId: string): boolean {
  return (routing.workers.get(workerId)?.loads.length ?? 0) > 0;
}
