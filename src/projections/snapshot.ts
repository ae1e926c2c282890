/**
 * The snapshot format: a `Snapshot` event carries the folded `ClusterState` as JSON. Restoring
 * one checks it against this schema, so a hand-edited or corrupt snapshot is refused with the seq
 * and the field, never folded into a state placement would trip over.
 */
import { Type as T, type Static, type TSchema } from '@sinclair/typebox';
import { TypeCompiler } from '@sinclair/typebox/compiler';
import { CatalogueSchema } from '../events/catalogue.js';
import { InvalidEventError } from '../events/errors.js';
import {
  DemandSchema,
  EVENT_SCHEMA_VERSION,
  EVICTION_REASONS,
  FLAVORS,
  literals,
  RESIDENCY_STATES,
  SESSION_EXPIRY_REASONS,
} from '../events/schema.js';
import { explainMismatch } from '../events/schema-errors.js';
import type { Demand, EventOf } from '../events/types.js';
import { configInForce } from '../shared/config.js';
import { CONTAINER_RECORD_STATES, WORKER_STATUSES, type ClusterState } from './cluster-state.js';
import { admissionIndexOf } from './admission-index.js';
import { imageKeyIndexOf, imageSlot } from './image-holdings.js';
import { idleSlots } from './queries.js';
import type { QuotaTable } from './quota-state.js';
import { initialRouting, type RoutingState } from './routing-state.js';

const Nullable = <S extends TSchema>(schema: S) => T.Union([schema, T.Null()]);
const Count = T.Integer({ minimum: 0 });
const Text = T.String();

const ContainerSchema = T.Object({
  containerId: Text,
  state: literals(CONTAINER_RECORD_STATES),
  checkpointId: Nullable(Text),
  since: Text,
  reportSeq: Nullable(Count),
});

const WorkerSchema = T.Object({
  workerId: Text,
  address: Nullable(Text),
  status: literals(WORKER_STATUSES),
  error: Nullable(Text),
  flavor: literals(FLAVORS),
  memoryTotal: Nullable(Count),
  maxContainers: Nullable(Count),
  gpuMemoryTotal: Nullable(Count),
  utilization: Nullable(
    T.Object({
      memoryUsed: Count,
      containerCount: Count,
      cpuUsed: Nullable(T.Number()),
      cpuTotal: Nullable(T.Number()),
      gpuMemoryUsed: Nullable(Count),
      at: Text,
      standbys: T.Optional(Nullable(T.Array(T.Object({ checkpointId: Text, ready: Count })))),
    }),
  ),
  reservedMemory: Count,
  inFlight: Count,
  probeFailures: Count,
  registeredAt: Text,
  lastHeardAt: Text,
  evictedReason: Nullable(literals(EVICTION_REASONS)),
  containers: T.Record(T.String(), ContainerSchema),
  pinnedSessions: T.Record(T.String(), Text),
  instanceId: Nullable(Text),
  callContainers: T.Record(T.String(), T.Array(Text)),
  sessionContainers: T.Record(T.String(), T.Object({ sessionId: Text, unlisted: T.Boolean() })),
  idleContainers: Count,
  reportedSlots: Nullable(Count),
  lastFullReportSeq: Nullable(Count),
});

const SessionSchema = T.Object({
  sessionId: Text,
  tenantId: Nullable(Text),
  pin: Nullable(T.Object({ workerId: Text, containerId: Text, checkpointId: Nullable(Text) })),
  pinnedBy: Nullable(Text),
  expired: Nullable(T.Object({ reason: literals(SESSION_EXPIRY_REASONS), at: Text, seq: Count })),
});

const ReservationSchema = T.Object({
  requestId: Text,
  sessionId: Nullable(Text),
  tenantId: Nullable(Text),
  workerId: Text,
  containerId: Nullable(Text),
  checkpointId: Nullable(Text),
  memory: Count,
  since: Text,
  unreachable: T.Array(Text),
});

const PendingCallSchema = T.Object({
  requestId: Text,
  sessionId: Nullable(Text),
  tenantId: Nullable(Text),
  memory: Count,
  unreachable: T.Array(Text),
  deadlineMs: T.Optional(Nullable(Count)),
  imageKey: T.Optional(Text),
});

const QueuedCallSchema = T.Object({
  requestId: Text,
  sessionId: Nullable(Text),
  tenantId: Nullable(Text),
  demand: DemandSchema,
  retryOf: Nullable(Text),
  seq: Count,
  at: Text,
  revision: T.Optional(Count),
  deadlineMs: T.Optional(Count),
  imageKey: T.Optional(Text),
});

const RoutingSchema = T.Object({
  revision: Count,
  entries: T.Record(
    T.String(),
    T.Object({
      tenantId: Text,
      version: Text,
      k: Count,
      revision: Count,
      previousVersion: Nullable(Text),
      since: Text,
    }),
  ),
  revisions: T.Record(
    T.String(),
    T.Object({ tenantId: Text, version: Nullable(Text), k: Nullable(Count), at: Text }),
  ),
  staged: T.Record(
    T.String(),
    T.Object({
      tenantId: Text,
      version: Text,
      k: Count,
      targetWorkers: T.Array(Text),
      since: Text,
    }),
  ),
  retained: T.Record(
    T.String(),
    T.Object({ tenantId: Text, version: Text, k: Count, since: Text }),
  ),
  workers: T.Record(
    T.String(),
    T.Object({
      versions: T.Record(
        T.String(),
        T.Object({
          state: literals(RESIDENCY_STATES),
          error: Nullable(Text),
          since: Text,
          // Absent in snapshots written before loads were measured.
          loadMs: T.Optional(Nullable(Count)),
        }),
      ),
      loads: T.Array(T.Object({ requestId: Nullable(Text), checkpointId: Text, since: Text })),
      protectedIds: Nullable(T.Array(Text)),
      residentMemory: Nullable(Count),
    }),
  ),
  calls: T.Record(T.String(), T.Object({ tenantId: Text, revision: Nullable(Count), at: Text })),
  sessions: T.Record(T.String(), T.Object({ tenantId: Text, revision: Count })),
});

const QuotasSchema = T.Object({
  revision: Count,
  entries: T.Record(
    T.String(),
    T.Object({
      weight: T.Number({ exclusiveMinimum: 0 }),
      maxSlots: Nullable(T.Integer({ minimum: 1 })),
      maxQueued: T.Integer({ minimum: 1 }),
      revision: T.Integer({ minimum: 1 }),
    }),
  ),
});

const ImagesSchema = T.Record(
  T.String(),
  T.Array(
    T.Object({
      tenantId: Nullable(Text),
      imageId: Text,
      bytes: Count,
      // Absent in snapshots written before the fold kept build times: 0, not known.
      buildMs: T.Optional(Count),
      declarations: T.Array(Text),
    }),
  ),
);

/** The JSON schema of a snapshot's `state`. */
export const ClusterStateSchema = T.Object({
  schemaVersion: T.Integer({ minimum: 1, maximum: EVENT_SCHEMA_VERSION }),
  lastSeq: Count,
  config: T.Record(T.String(), T.Number()),
  routerVersion: Nullable(Text),
  // Absent in snapshots written before routers recorded the rules' version.
  rulesVersion: T.Optional(Nullable(T.Integer({ minimum: 1 }))),
  routerStartedAt: Nullable(Text),
  catalogue: Nullable(T.Object({ revision: Text, catalogue: CatalogueSchema })),
  workers: T.Record(T.String(), WorkerSchema),
  sessions: T.Record(T.String(), SessionSchema),
  reservations: T.Record(T.String(), ReservationSchema),
  pendingCalls: T.Record(T.String(), PendingCallSchema),
  // Absent in snapshots written before the admission queue existed.
  queue: T.Optional(T.Record(T.String(), QueuedCallSchema)),
  // Absent in snapshots written before routing existed.
  routing: T.Optional(RoutingSchema),
  // Absent in snapshots written before quotas existed.
  quotas: T.Optional(QuotasSchema),
  // Absent in snapshots written before workers' images were folded, and when none is held.
  images: T.Optional(ImagesSchema),
});

/** A state as JSON: what a `Snapshot` event carries (Maps become objects keyed by ID). */
export type ClusterStateJson = Static<typeof ClusterStateSchema>;

type Jsonified<T> =
  T extends ReadonlyMap<string, infer V>
    ? Record<string, Jsonified<V>>
    : T extends readonly (infer U)[]
      ? U[]
      : T extends object
        ? { -readonly [K in keyof T]: Jsonified<T[K]> }
        : T;

// The schema and the `ClusterState` interface must describe the same thing.
type SameShape<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const schemaMatchesState: SameShape<
  Omit<ClusterStateJson, 'config' | 'rulesVersion' | 'routing' | 'queue' | 'quotas' | 'images'>,
  Omit<
    Jsonified<ClusterState>,
    | 'config'
    | 'rulesVersion'
    | 'routing'
    | 'sessionExpiries'
    | 'queue'
    | 'admission'
    | 'quotas'
    | 'images'
    | 'imageKeys'
  >
> = true;
void schemaMatchesState;

const routingMatchesState: SameShape<Static<typeof RoutingSchema>, Jsonified<RoutingState>> = true;
void routingMatchesState;

const quotasMatchState: SameShape<Static<typeof QuotasSchema>, Jsonified<QuotaTable>> = true;
void quotasMatchState;

const checkState = TypeCompiler.Compile(ClusterStateSchema);

const mapOf = <V, W>(record: Record<string, V>, convert: (value: V) => W): Map<string, W> =>
  new Map(Object.entries(record).map(([key, value]) => [key, convert(value)]));

const recordOf = <V, W>(map: ReadonlyMap<string, V>, convert: (value: V) => W): Record<string, W> =>
  Object.fromEntries([...map].map(([key, value]) => [key, convert(value)]));

/**
 * The state a JSON snapshot describes (not checked: see `restoreSnapshot`). What the state derives
 * from other parts (which container each call runs in, the idle containers each worker holds) is
 * derived again, so a snapshot cannot carry a count that disagrees with its records.
 */
export function stateFromJson(json: ClusterStateJson): ClusterState {
  const copy = structuredClone(json);
  const callContainers = new Map<string, Map<string, string[]>>();
  for (const reservation of Object.values(copy.reservations)) {
    if (reservation.containerId === null) continue;
    const calls = callContainers.get(reservation.workerId) ?? new Map<string, string[]>();
    calls.set(reservation.containerId, [
      ...(calls.get(reservation.containerId) ?? []),
      reservation.requestId,
    ]);
    callContainers.set(reservation.workerId, calls);
  }
  for (const calls of callContainers.values()) for (const ids of calls.values()) ids.sort();
  const state = {
    ...copy,
    config: configInForce(copy.config),
    rulesVersion: copy.rulesVersion ?? null,
    workers: mapOf(copy.workers, (worker) => {
      const calls = callContainers.get(worker.workerId) ?? new Map<string, string[]>();
      const containers = mapOf(worker.containers, (container) => container);
      const pinnedSessions = mapOf(worker.pinnedSessions, (sessionId) => sessionId);
      const sessionContainers = mapOf(worker.sessionContainers, (held) => held);
      const holders = { callContainers: calls, pinnedSessions, sessionContainers };
      const idleContainers = idleSlots(holders, containers);
      return {
        ...worker,
        containers,
        pinnedSessions,
        callContainers: calls,
        sessionContainers,
        idleContainers,
      };
    }),
    sessions: mapOf(copy.sessions, (session) => session),
    sessionExpiries: expiriesOf(copy.sessions),
    reservations: mapOf(copy.reservations, (reservation) => reservation),
    pendingCalls: mapOf(copy.pendingCalls, (call) => call),
    // In the order queued (a JSON object keeps its keys' insertion order, but not for every key).
    queue: new Map(
      Object.values(copy.queue ?? {})
        .sort((a, b) => a.seq - b.seq)
        .map((call) => [call.requestId, { ...call, demand: demandOf(call.demand) }]),
    ),
    routing: copy.routing ? routingFromJson(copy.routing) : initialRouting(),
    quotas: {
      revision: copy.quotas?.revision ?? 0,
      entries: mapOf(copy.quotas?.entries ?? {}, (entry) => entry),
    },
    images: mapOf(
      copy.images ?? {},
      (images) =>
        new Map(
          images.map((image) => [
            imageSlot(image.tenantId, image.imageId),
            { ...image, buildMs: image.buildMs ?? 0 },
          ]),
        ),
    ),
  };
  return {
    ...state,
    admission: admissionIndexOf(state),
    imageKeys: imageKeyIndexOf(state.images),
  };
}

/** A demand as a snapshot holds it, its absent parts null (as a read event's). */
function demandOf(demand: Static<typeof DemandSchema>): Demand {
  return {
    memory: demand.memory ?? null,
    gpuMemory: demand.gpuMemory ?? null,
    gpu: demand.gpu ?? null,
    disableOptimizedExecution: demand.disableOptimizedExecution ?? null,
    checkpointId: demand.checkpointId ?? null,
    imports: demand.imports ?? null,
    packages: demand.packages ?? null,
    pinned: demand.pinned ?? null,
  };
}

/** The ended and expired sessions, in the order they ended (by seq): when each ended. */
function expiriesOf(sessions: ClusterStateJson['sessions']): Map<string, number> {
  const ended = Object.values(sessions).flatMap((session) =>
    session.expired === null ? [] : [{ sessionId: session.sessionId, expired: session.expired }],
  );
  ended.sort((a, b) => a.expired.seq - b.expired.seq);
  return new Map(ended.map(({ sessionId, expired }) => [sessionId, Date.parse(expired.at)]));
}

function routingFromJson(json: Static<typeof RoutingSchema>): RoutingState {
  const same = <V>(value: V) => value;
  return {
    revision: json.revision,
    entries: mapOf(json.entries, same),
    revisions: mapOf(json.revisions, same),
    staged: mapOf(json.staged, same),
    retained: mapOf(json.retained, same),
    workers: mapOf(json.workers, (worker) => ({
      ...worker,
      versions: mapOf(worker.versions, same),
    })),
    calls: mapOf(json.calls, same),
    sessions: mapOf(json.sessions, same),
  };
}

function routingToJson(routing: RoutingState): Static<typeof RoutingSchema> {
  const same = <V>(value: V) => value;
  return {
    revision: routing.revision,
    entries: recordOf(routing.entries, same),
    revisions: recordOf(routing.revisions, same),
    staged: recordOf(routing.staged, same),
    retained: recordOf(routing.retained, same),
    workers: recordOf(routing.workers, (worker) => ({
      ...worker,
      versions: recordOf(worker.versions, same),
    })),
    calls: recordOf(routing.calls, same),
    sessions: recordOf(routing.sessions, same),
  };
}

/** Call lists as this version writes them, from a version that wrote one request ID a container. */
function oneCallEach(calls: unknown): unknown {
  if (typeof calls !== 'object' || calls === null) return calls;
  return Object.fromEntries(
    Object.entries(calls as Record<string, unknown>).map(([containerId, ids]) => [
      containerId,
      typeof ids === 'string' ? [ids] : ids,
    ]),
  );
}

/** `record`'s entries that are objects changed by `change` (anything else as it is). */
function eachObject(
  record: unknown,
  change: (entry: Record<string, unknown>) => Record<string, unknown>,
): unknown {
  if (typeof record !== 'object' || record === null) return record;
  return Object.fromEntries(
    Object.entries(record as Record<string, unknown>).map(([id, entry]) =>
      typeof entry === 'object' && entry !== null
        ? [id, change(entry as Record<string, unknown>)]
        : [id, entry],
    ),
  );
}

/**
 * The tenant of `requestId` as a snapshot written before records carried tenants knows it: the
 * tenant calls it remembers for their retries; null when it does not remember the call.
 */
function rememberedTenant(state: Record<string, unknown>, requestId: unknown): string | null {
  if (typeof requestId !== 'string') return null;
  const routing = state.routing as { calls?: Record<string, { tenantId?: unknown }> } | undefined;
  const tenantId = routing?.calls?.[requestId]?.tenantId;
  return typeof tenantId === 'string' ? tenantId : null;
}

/**
 * A snapshot state written by an earlier version, with the parts it predates at their defaults:
 * container report numbers, worker instances and slot counts, the budgets of requested calls,
 * and the tenants of calls and sessions (from the tenant calls it remembers, else none).
 */
function withDefaults(state: unknown): unknown {
  if (typeof state !== 'object' || state === null) return state;
  const value = { ...(state as Record<string, unknown>) };
  value.pendingCalls = eachObject(value.pendingCalls ?? {}, (call) => ({
    tenantId: rememberedTenant(value, call.requestId),
    ...call,
  }));
  value.reservations = eachObject(value.reservations, (reservation) => ({
    unreachable: [],
    tenantId: rememberedTenant(value, reservation.requestId),
    ...reservation,
  }));
  // A session's owner is the tenant of the call that pinned it, when the snapshot remembers it.
  value.sessions = eachObject(value.sessions, (session) => ({
    tenantId: rememberedTenant(value, session.pinnedBy),
    ...session,
  }));
  const workers = value.workers;
  if (typeof workers !== 'object' || workers === null) return value;
  value.workers = Object.fromEntries(
    Object.entries(workers as Record<string, unknown>).map(([id, worker]) => {
      if (typeof worker !== 'object' || worker === null) return [id, worker];
      const record = { ...(worker as Record<string, unknown>) };
      record.instanceId ??= null;
      // Derived again from the reservations when read; earlier versions wrote one call a container.
      record.callContainers = oneCallEach(record.callContainers ?? {});
      record.idleContainers ??= 0;
      // Rules 7 on; a snapshot written before them holds none.
      record.sessionContainers ??= {};
      record.reportedSlots ??= null;
      record.lastFullReportSeq ??= null;
      const containers = record.containers;
      if (typeof containers === 'object' && containers !== null) {
        record.containers = Object.fromEntries(
          Object.entries(containers as Record<string, unknown>).map(([cid, container]) =>
            typeof container === 'object' && container !== null
              ? [cid, { reportSeq: null, ...(container as Record<string, unknown>) }]
              : [cid, container],
          ),
        );
      }
      return [id, record];
    }),
  );
  return value;
}

/** A detached JSON copy of a state, as a `Snapshot` event carries it and `replay state` prints it. */
export function stateToJson(state: ClusterState): ClusterStateJson {
  // Derived from the records when a snapshot is read (`stateFromJson`); the quotas are below.
  const { sessionExpiries, admission, quotas, images, imageKeys, ...recorded } = state;
  void sessionExpiries;
  void admission;
  void imageKeys;
  void quotas;
  return structuredClone({
    ...recorded,
    workers: recordOf(state.workers, (worker) => ({
      ...worker,
      containers: recordOf(worker.containers, (container) => container),
      pinnedSessions: recordOf(worker.pinnedSessions, (sessionId) => sessionId),
      callContainers: recordOf(worker.callContainers, (requestIds) => [...requestIds]),
      sessionContainers: recordOf(worker.sessionContainers, (held) => ({ ...held })),
    })),
    sessions: recordOf(state.sessions, (session) => session),
    reservations: recordOf(state.reservations, (reservation) => ({
      ...reservation,
      unreachable: [...reservation.unreachable],
    })),
    pendingCalls: recordOf(state.pendingCalls, (call) => ({
      ...call,
      unreachable: [...call.unreachable],
    })),
    queue: recordOf(state.queue, (call) => ({ ...call, demand: structuredClone(call.demand) })),
    routing: routingToJson(state.routing),
    // Left out before any quota event, so a log without quotas snapshots as it did before them.
    ...(state.quotas.revision === 0
      ? {}
      : {
          quotas: {
            revision: state.quotas.revision,
            entries: recordOf(state.quotas.entries, (entry) => ({ ...entry })),
          },
        }),
    // Left out while no worker holds an image, so a log without images snapshots as before them.
    ...(images.size === 0
      ? {}
      : {
          images: recordOf(images, (held) =>
            [...held.values()].map((image) => ({
              ...image,
              declarations: [...image.declarations],
            })),
          ),
        }),
  });
}

/** The state a `Snapshot` event carries, checked, detached from the event, as of its seq. */
export function restoreSnapshot(event: EventOf<'Snapshot'>): ClusterState {
  const state = withDefaults(event.state);
  if (!checkState.Check(state)) {
    const { field, problem } = explainMismatch(checkState, state);
    throw new InvalidEventError({ seq: event.seq }, field ? `state.${field}` : 'state', problem);
  }
  return { ...stateFromJson(state), lastSeq: event.seq };
}

/**
 * How many entries of `state` grow with traffic rather than with the cluster: the tenant calls
 * remembered for their retries (`PIN_RETENTION`) and the sessions (an expired one keeps its
 * record). The log spaces its snapshots at least this many events apart (`LogProjection.weight`).
 */
export function snapshotWeight(state: ClusterState): number {
  return state.routing.calls.size + state.routing.sessions.size + state.sessions.size;
}

/** A detached JSON copy of a state, as a `Snapshot` event carries it. */
export function snapshotOf(state: ClusterState): Record<string, unknown> {
  return stateToJson(state);
}
