/**
 * How events change the routing part of the state (`routing-state.ts`): the one recipe, run by
 * `applyEvent` before the rest of the state takes the event in (a call's end still finds its
 * reservation here, to know the worker whose cold load it ends). Rules in docs/tenant-routing.md.
 */
import { rulesSteps } from './rules-steps.js';
import type { Draft } from 'immer';
import type { ClusterEvent, EventOf } from '../events/types.js';
import type { ClusterState, WorkerRecord } from './cluster-state.js';
import { isLive } from './queries.js';
import { retainedKey, type ColdLoad, type Residency, type RoutingState } from './routing-state.js';

type State = Draft<ClusterState>;
type Routing = Draft<RoutingState>;
type WorkerPart = Routing['workers'] extends Map<string, infer W> ? W : never;

/** Applies `event` to `state.routing` (events that do not concern routing change nothing). */
export function applyRoutingEvent(state: State, event: ClusterEvent): void {
  const routing = state.routing;
  switch (event.type) {
    case 'PinStaged':
      routing.staged.set(event.tenantId, {
        tenantId: event.tenantId,
        version: event.version,
        k: event.k,
        targetWorkers: [...event.targetWorkers],
        since: event.at,
      });
      return;
    case 'RoutingRevised':
      revise(routing, event, state.config.PIN_RETENTION);
      return;
    case 'ResidencyChanged':
      residencyChanged(routing, event);
      return;
    case 'ResidencyProtected':
      workerPart(routing, event.workerId).protectedIds = [...event.checkpointIds];
      return;
    case 'ResidencyBudget':
      workerPart(routing, event.workerId).residentMemory = event.residentMemory;
      return;
    case 'WorkerRegistered': {
      // A new process of the worker (or one the router cannot tell apart): it reports its
      // versions again, and is told what to keep again. The same process reporting its status
      // again still holds what it reported: forgetting it would leave a window (until its full
      // report lands) in which its versions look unreported to flips and pinned placement.
      const known = routing.workers.get(event.workerId);
      const keeps =
        rulesSteps(state.rulesVersion).sameProcessKeepsResidency &&
        sameProcess(state.workers.get(event.workerId), event.instanceId);
      if (known && !keeps) {
        routing.workers.set(event.workerId, emptyWorker());
      }
      return;
    }
    case 'WorkerEvicted':
      routing.workers.delete(event.workerId);
      return;
    case 'CallRequested':
      if (event.tenantId !== null) rememberCall(state, event);
      return;
    case 'CallPlaced':
      placed(routing, event);
      return;
    case 'CallRejected':
      if (event.routingRevision !== null) resolved(routing, event.requestId, event.routingRevision);
      return;
    case 'CallDialFailed':
      // The worker never got the call: its cold load there never started.
      endLoad(routing, event.workerId, (load) => load.requestId === event.requestId);
      return;
    case 'CallFinished':
    case 'ReservationExpired': {
      const workerId = state.reservations.get(event.requestId)?.workerId;
      if (workerId !== undefined)
        endLoad(routing, workerId, (load) => load.requestId === event.requestId);
      return;
    }
    case 'SessionExpired':
    case 'SessionEnded':
      routing.sessions.delete(event.sessionId);
      return;
    default:
      return;
  }
}

/** Whether a registration naming `instanceId` comes from the live process `known` records. */
function sameProcess(known: WorkerRecord | undefined, instanceId: string | null): boolean {
  return (
    known !== undefined && isLive(known) && instanceId !== null && known.instanceId === instanceId
  );
}

function emptyWorker(): WorkerPart {
  return { versions: new Map(), loads: [], protectedIds: null, residentMemory: null };
}

function workerPart(routing: Routing, workerId: string): WorkerPart {
  const known = routing.workers.get(workerId);
  if (known) return known;
  routing.workers.set(workerId, emptyWorker());
  return routing.workers.get(workerId) as WorkerPart;
}

function revise(routing: Routing, event: EventOf<'RoutingRevised'>, retentionMs: number): void {
  const { tenantId, version, k } = event;
  const previous = routing.entries.get(tenantId);
  routing.revision = event.revision;
  routing.revisions.set(String(event.revision), {
    tenantId,
    version,
    k,
    at: event.at,
  });
  if (previous && previous.version !== version) {
    routing.retained.set(retainedKey(tenantId, previous.version), {
      tenantId,
      version: previous.version,
      k: previous.k,
      since: event.at,
    });
  }
  const staged = routing.staged.get(tenantId);
  if (version === null) {
    routing.entries.delete(tenantId);
    routing.staged.delete(tenantId);
  } else {
    routing.retained.delete(retainedKey(tenantId, version));
    routing.entries.set(tenantId, {
      tenantId,
      version,
      k: k ?? previous?.k ?? 1,
      revision: event.revision,
      previousVersion: event.previousVersion,
      since: event.at,
    });
    if (staged?.version === version) routing.staged.delete(tenantId);
  }
  const cutoff = Date.parse(event.at) - retentionMs;
  for (const [key, retained] of routing.retained) {
    if (Date.parse(retained.since) < cutoff) routing.retained.delete(key);
  }
}

function residencyChanged(routing: Routing, event: EventOf<'ResidencyChanged'>): void {
  const part = workerPart(routing, event.workerId);
  const before = part.versions.get(event.checkpointId);
  part.versions.set(event.checkpointId, {
    state: event.state,
    error: event.error,
    since: event.at,
    loadMs: measuredLoad(before, event),
  });
  // Any report ends a reported load of that version; any but `loading` ends a call's load too.
  endLoad(
    routing,
    event.workerId,
    (load) =>
      load.checkpointId === event.checkpointId &&
      (load.requestId === null || event.state !== 'loading'),
  );
  if (event.state === 'loading') {
    part.loads.push({ requestId: null, checkpointId: event.checkpointId, since: event.at });
  }
}

/** A load measured by `event` (`loading` then `resident`), else the one measured before. */
function measuredLoad(
  before: Residency | undefined,
  event: EventOf<'ResidencyChanged'>,
): number | null {
  if (before?.state === 'loading' && event.state === 'resident') {
    const ms = Date.parse(event.at) - Date.parse(before.since);
    if (Number.isSafeInteger(ms) && ms >= 0) return ms;
  }
  return before?.loadMs ?? null;
}

function endLoad(routing: Routing, workerId: string, ends: (load: ColdLoad) => boolean): void {
  const part = routing.workers.get(workerId);
  if (!part || !part.loads.some(ends)) return;
  part.loads = part.loads.filter((load) => !ends(load));
}

function placed(routing: Routing, event: EventOf<'CallPlaced'>): void {
  if (event.routingRevision === null) return;
  resolved(routing, event.requestId, event.routingRevision);
  const version = event.version ?? event.checkpointId;
  if (event.coldLoad === true && version !== null) {
    workerPart(routing, event.workerId).loads.push({
      requestId: event.requestId,
      checkpointId: version,
      since: event.at,
    });
  }
  const record = routing.revisions.get(String(event.routingRevision));
  if (event.sessionId !== null && record && !routing.sessions.has(event.sessionId)) {
    routing.sessions.set(event.sessionId, {
      tenantId: record.tenantId,
      revision: event.routingRevision,
    });
  }
}

function resolved(routing: Routing, requestId: string, revision: number): void {
  const call = routing.calls.get(requestId);
  if (call) call.revision = revision;
}

/**
 * Remembers a tenant's call for its retries (`forget.ts` forgets it once `PIN_RETENTION` has
 * passed and it no longer runs). A request ID remembered for another tenant stays that tenant's
 * (placement refuses the reuse): its record is left as it is.
 */
function rememberCall(state: State, event: EventOf<'CallRequested'>): void {
  const calls = state.routing.calls;
  const owner = calls.get(event.requestId);
  if (owner !== undefined && owner.tenantId !== event.tenantId) return;
  calls.delete(event.requestId);
  calls.set(event.requestId, {
    tenantId: event.tenantId as string,
    revision: null,
    at: event.at,
  });
}
