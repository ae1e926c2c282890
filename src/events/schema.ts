/**
 * The v1 event vocabulary (docs/event-log.md), as TypeBox schemas. The schemas are the single source
 * of truth: the TypeScript types (`types.ts`) and the reader's validation both come from them.
 *
 * Optional fields are declared with `opt()`: readers accept them absent and normalize them to
 * `null`, and the router always writes them (as `null` when unknown).
 */
import {
  Type as T,
  type TLiteral,
  type TObject,
  type TProperties,
  type TSchema,
  type TUnion,
} from '@sinclair/typebox';
import { GRPC_CODE_NAMES } from '../shared/grpc-codes.js';
import { CatalogueSchema } from './catalogue.js';

/**
 * The version of the event vocabulary this code writes (and reads, with every older one: see
 * `upcast.ts`). v2: every consequence of a cause is an event of the log, and a fold applies
 * events only; in v1 a fold also applied some consequences itself.
 */
export const EVENT_SCHEMA_VERSION = 2;

/** An ISO-8601 UTC timestamp with milliseconds, as `Date.prototype.toISOString` writes it. */
export const ISO_INSTANT_PATTERN = '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}\\.\\d{3}Z$';

const Id = T.String({ minLength: 1 });
const Bytes = T.Integer({ minimum: 0 });
const Count = T.Integer({ minimum: 0 });
const Text = T.String();
/** A worker's report sequence number: each report it takes is numbered, from 1, per process. */
const ReportSeq = T.Integer({ minimum: 1 });

/** Marks a field optional: absent or `null` on input, always present (maybe `null`) once read. */
function opt<S extends TSchema>(schema: S) {
  return T.Optional(T.Union([schema, T.Null()]));
}

type LiteralTuple<V extends readonly string[]> = { -readonly [I in keyof V]: TLiteral<V[I]> };

/** A schema accepting exactly one of `values`. */
export function literals<const V extends readonly string[]>(values: V): TUnion<LiteralTuple<V>> {
  return T.Union(values.map((value) => T.Literal(value))) as unknown as TUnion<LiteralTuple<V>>;
}

/** The flavors a worker can be: what its hardware offers. */
export const FLAVORS = ['cpu', 'gpu'] as const;
/** A worker's flavor. */
export type Flavor = (typeof FLAVORS)[number];

/** The statuses a registration carries (`WorkerRegistered.status`). */
export const REGISTRATION_STATUSES = ['ready', 'error'] as const;
/** A registration's status. */
export type RegistrationStatus = (typeof REGISTRATION_STATUSES)[number];

/**
 * Why a worker was evicted (`WorkerEvicted.reason`): probes failed, it went silent, it left, or a
 * new process of the same worker registered (`restarted`: the old one's containers are gone).
 */
export const EVICTION_REASONS = ['probe', 'ttl', 'left', 'restarted'] as const;
/** Why a worker was evicted. */
export type EvictionReason = (typeof EVICTION_REASONS)[number];

/** The states a worker reports for a container (`ContainerStateChanged.state`). */
export const CONTAINER_STATES = ['busy', 'ready', 'error', 'removed'] as const;
/** A container state a worker reports. */
export type ContainerState = (typeof CONTAINER_STATES)[number];

/**
 * Why the router's sweep forgot a container record (`ContainerForgotten.reason`): `unreported`, an
 * idle container the worker should have destroyed and reported removed (at `EXECUTOR_TTL`) but
 * did not; `error`, a container in error past `EXECUTOR_ERROR_TTL`; `idle`, in logs written before
 * the worker owned `EXECUTOR_TTL` (the router then forgot idle containers itself).
 */
export const CONTAINER_FORGET_REASONS = ['unreported', 'error', 'idle'] as const;
/** A container a worker lists in a full report (a registration or a load report with its containers). */
export const ContainerEntrySchema = T.Object({
  containerId: Id,
  state: literals(['busy', 'ready', 'error'] as const),
  checkpointId: T.Union([Text, T.Null()]),
});

/** Why the reaper forgot a container record. */
export type ContainerForgetReason = (typeof CONTAINER_FORGET_REASONS)[number];

/**
 * Why a session expired (`SessionExpired.reason`, and the expired session record). `ended`: its
 * client ended it (`SessionEnded`, never written as a `SessionExpired` reason).
 */
export const SESSION_EXPIRY_REASONS = [
  'worker_evicted',
  'container_removed',
  'container_forgotten',
  'ended',
] as const;
/** Why a session expired. */
export type SessionExpiryReason = (typeof SESSION_EXPIRY_REASONS)[number];

/** Why a session lost its pin (`SessionUnpinned.reason`). */
/**
 * Why a queued call left the queue unplaced: its client's deadline passed, its client went,
 * it waited `QUEUE_TIMEOUT`, or the router restarted (its stream died with the old router).
 */
export const QUEUE_LEAVE_REASONS = ['deadline', 'cancelled', 'timeout', 'restart'] as const;
/** Why a queued call left the queue unplaced. */
export type QueueLeaveReason = (typeof QUEUE_LEAVE_REASONS)[number];

export const SESSION_UNPIN_REASONS = [
  'call_failed',
  'reservation_expired',
  'container_unavailable',
] as const;
/** Why a session lost its pin. */
export type SessionUnpinReason = (typeof SESSION_UNPIN_REASONS)[number];

/**
 * What a worker reports of a version it holds (`ResidencyChanged.state`): `loading` (being built
 * or restored), `resident` (in memory: calls start from it at once), `cached` (an artifact on local
 * disk, e.g. a CRIU image, but nothing in memory), `evicted` (dropped from memory), `failed` (a
 * load failed; `error` says why).
 */
export const RESIDENCY_STATES = ['loading', 'resident', 'cached', 'evicted', 'failed'] as const;
/** A version's residency on a worker, as it reports it. */
export type ResidencyState = (typeof RESIDENCY_STATES)[number];

/**
 * Why the router moved a segment of its log to the archive (`LogSegmentArchived.reason`): it
 * grew older than `LOG_RETENTION`, the live log grew beyond `LOG_MAX_BYTES`, or (a JetStream log)
 * it closed and is archived before the stream's own limits drop it.
 */
export const ARCHIVE_REASONS = ['retention', 'size', 'stream-limits'] as const;
/** Why a segment was archived. */
export type ArchiveReason = (typeof ARCHIVE_REASONS)[number];

/** An ISO-8601 UTC instant with milliseconds, in a field (the envelope's `at` has the same form). */
const Instant = T.String({ pattern: ISO_INSTANT_PATTERN });
/** A seq, in a field. */
const Seq = T.Integer({ minimum: 0 });

/**
 * Why a worker no longer holds an image (`ImageRemoved.reason`, docs/images.md): `evicted` (its
 * cache needed the room), `removed` (an operator removed it), `absent` (the worker's report of
 * every image it holds, after its registration, does not list it). `absent` came with the
 * codec's value format 4.
 */
export const IMAGE_REMOVAL_REASONS = ['evicted', 'removed', 'absent'] as const;
/** An image's identity: the SHA-256 of its wheels, imports, environment, Python and flavor. */
const ImageId = T.String({ pattern: '^[0-9a-f]{64}$' });

/** A call's resource and placement demand, exactly as the client sent it. */
export const DemandSchema = T.Object({
  memory: opt(Bytes),
  gpuMemory: opt(Bytes),
  gpu: opt(T.Boolean()),
  disableOptimizedExecution: opt(T.Boolean()),
  checkpointId: opt(Text),
  imports: opt(T.Array(Text)),
  packages: opt(T.Array(Text)),
  /** The call asks for its tenant's pinned version (docs/tenant-routing.md). */
  pinned: opt(T.Boolean()),
});

/** A routing table revision: global, from 1, one more with every `RoutingRevised`. */
const Revision = T.Integer({ minimum: 1 });
/** How many workers a tenant's version is kept on. */
const SubsetSize = T.Integer({ minimum: 1 });

/** A quota table revision: global, from 1, one more with every `QuotaChanged` or `QuotaRemoved`. */
const QuotaRevision = T.Integer({ minimum: 1 });

/** A configuration value as recorded by `RouterStarted`. */
const ConfigValue = T.Union([T.Number(), T.String(), T.Boolean(), T.Null()]);

/** The fields of each event type, without the envelope (`seq`, `at`, `type`). */
export const EVENT_FIELDS = {
  RouterStarted: {
    config: T.Record(T.String(), ConfigValue),
    version: Text,
    rulesVersion: opt(T.Integer({ minimum: 1 })),
    routerId: opt(Text),
    takeoverFrom: opt(Text),
    schemaVersion: opt(T.Integer({ minimum: 1 })),
  },
  CatalogueLoaded: { revision: Text, catalogue: CatalogueSchema },
  WorkerRegistered: {
    workerId: Id,
    address: opt(Text),
    status: literals(REGISTRATION_STATUSES),
    error: opt(Text),
    flavor: literals(FLAVORS),
    memoryTotal: opt(Bytes),
    maxContainers: opt(Count),
    gpuMemoryTotal: opt(Bytes),
    instanceId: opt(Id),
    containers: opt(T.Array(ContainerEntrySchema)),
    reportSeq: opt(ReportSeq),
  },
  WorkerUtilization: {
    workerId: Id,
    memoryUsed: Bytes,
    containerCount: Count,
    cpuUsed: opt(T.Number({ minimum: 0 })),
    cpuTotal: opt(T.Number({ minimum: 0 })),
    gpuMemoryUsed: opt(Bytes),
    containers: opt(T.Array(ContainerEntrySchema)),
    reportSeq: opt(ReportSeq),
    /** Its ready standbys per checkpoint, as it reported them (`replay explain` shows them). */
    standbys: opt(T.Array(T.Object({ checkpointId: Id, ready: Count }))),
  },
  WorkerLeaving: { workerId: Id },
  WorkerProbeFailed: { workerId: Id, consecutive: T.Integer({ minimum: 1 }), error: opt(Text) },
  WorkerProbeSucceeded: { workerId: Id },
  WorkerEvicted: { workerId: Id, reason: literals(EVICTION_REASONS) },
  ContainerStateChanged: {
    workerId: Id,
    containerId: Id,
    state: literals(CONTAINER_STATES),
    checkpointId: opt(Text),
    reportSeq: opt(ReportSeq),
  },
  ContainerForgotten: { workerId: Id, containerId: Id, reason: literals(CONTAINER_FORGET_REASONS) },
  CallRequested: {
    requestId: Id,
    sessionId: opt(Text),
    tenantId: opt(Id),
    demand: DemandSchema,
    retryOf: opt(Text),
    /** A batch's input count (one call carrying many inputs of a map); null for a plain call. */
    inputs: opt(T.Integer({ minimum: 1 })),
    /** The function the client named (`module.qualname`), for the call history; null: none. */
    function: opt(Text),
    /** How long the call waited for its session's turn, ms; null: it did not wait. */
    turnWaitMs: opt(Count),
    /**
     * How long its caller's deadline left it as of this event, ms (the caller's gRPC deadline as
     * the router saw it); null: the caller set none. Placement rules v6 shed a pinned call whose
     * version's cold load would not finish inside it.
     */
    deadlineMs: opt(Count),
    /**
     * The key of the call's image declaration for its tenant (SHA-256 hex of the tenant, the
     * requirements, imports and environment as the client declared them: what a worker looks its
     * built images up by); null: the call names no image. Placement rules v8 prefer a worker that
     * holds it.
     */
    imageKey: opt(ImageId),
  },
  CallPlaced: {
    requestId: Id,
    sessionId: opt(Text),
    workerId: Id,
    containerId: opt(Text),
    checkpointId: opt(Text),
    packages: T.Array(Text),
    skippedPackages: T.Array(Text),
    memory: opt(Bytes),
    version: opt(Text),
    routingRevision: opt(Revision),
    coldLoad: opt(T.Boolean()),
  },
  CallDialFailed: { requestId: Id, workerId: Id, error: Text },
  SessionTurnRefused: {
    requestId: Id,
    sessionId: Id,
    tenantId: opt(Id),
    /** How long it waited, ms (at least SESSION_WAIT_TIMEOUT). */
    waitedMs: Count,
    /** Calls of the session still ahead of it (the one running not counted). */
    ahead: Count,
  },
  CallRejected: {
    requestId: Id,
    sessionId: opt(Text),
    code: literals(GRPC_CODE_NAMES),
    message: Text,
    version: opt(Text),
    routingRevision: opt(Revision),
    retryAfterMs: opt(T.Integer({ minimum: 0 })),
  },
  CallQueued: {
    requestId: Id,
    sessionId: opt(Text),
    tenantId: opt(Id),
    demand: DemandSchema,
    retryOf: opt(Text),
    why: Text,
  },
  CallAdmitted: { requestId: Id },
  CallLeftQueue: {
    requestId: Id,
    reason: literals(QUEUE_LEAVE_REASONS),
    code: literals(GRPC_CODE_NAMES),
    message: Text,
  },
  CallBound: { requestId: Id, containerId: Id, checkpointId: opt(Text) },
  CallFinished: {
    requestId: Id,
    ok: T.Boolean(),
    code: opt(literals(GRPC_CODE_NAMES)),
    /** Why a failed call failed, in the words its client heard (bounded); null for one that succeeded. */
    message: opt(Text),
    /**
     * An OK call whose function raised: the exception's type name and the first line of its
     * message, as its worker reported them (bounded); null when it returned, or failed. History
     * only: no decision reads it.
     */
    raised: opt(T.Object({ type: Id, message: Text })),
    /**
     * An OK batch of a map (`CallRequested.inputs`): how many of its inputs raised, as its worker
     * counted them; null for a plain call, a failed batch, or a worker that did not say. History
     * only: no decision reads it.
     */
    inputsRaised: opt(T.Integer({ minimum: 0 })),
  },
  ReservationExpired: { requestId: Id },
  SessionPinned: {
    sessionId: Id,
    workerId: Id,
    containerId: Id,
    requestId: opt(Text),
    checkpointId: opt(Text),
  },
  SessionUnpinned: { sessionId: Id, reason: literals(SESSION_UNPIN_REASONS) },
  SessionExpired: {
    sessionId: Id,
    reason: literals(SESSION_EXPIRY_REASONS),
    causeSeq: opt(T.Integer({ minimum: 0 })),
  },
  SessionEnded: {
    sessionId: Id,
    tenantId: opt(Id),
    workerId: opt(Id),
    containerId: opt(Id),
  },
  PinStaged: { tenantId: Id, version: Id, k: SubsetSize, targetWorkers: T.Array(Id) },
  RoutingRevised: {
    revision: Revision,
    tenantId: Id,
    version: opt(Id),
    k: opt(SubsetSize),
    previousVersion: opt(Id),
  },
  QuotaChanged: {
    revision: QuotaRevision,
    tenantId: Id,
    /** Its weight in the fair order: its slots held are divided by it (above 0). */
    weight: T.Number({ exclusiveMinimum: 0 }),
    /** The most slots it may hold, sessions included; null: no cap. */
    maxSlots: opt(T.Integer({ minimum: 1 })),
    /** The most calls it may have waiting in the admission queue. */
    maxQueued: T.Integer({ minimum: 1 }),
  },
  QuotaRemoved: { revision: QuotaRevision, tenantId: Id },
  ResidencyChanged: {
    workerId: Id,
    checkpointId: Id,
    state: literals(RESIDENCY_STATES),
    error: opt(Text),
  },
  ResidencyProtected: { workerId: Id, checkpointIds: T.Array(Id) },
  ResidencyBudget: { workerId: Id, residentMemory: opt(Bytes) },
  ImageBuilt: {
    workerId: Id,
    tenantId: opt(Id),
    imageId: ImageId,
    bytes: Bytes,
    buildMs: T.Integer({ minimum: 0 }),
    /**
     * The keys of the tenant's declarations that resolved to the image on this worker (see
     * `CallRequested.imageKey`); null: a report from before workers sent them.
     */
    declarations: opt(T.Array(ImageId)),
  },
  ImageBuildFailed: { workerId: Id, tenantId: opt(Id), error: Text },
  ImageRemoved: {
    workerId: Id,
    tenantId: opt(Id),
    imageId: ImageId,
    reason: literals(IMAGE_REMOVAL_REASONS),
  },
  Snapshot: {
    schemaVersion: opt(T.Integer({ minimum: 1 })),
    state: T.Record(T.String(), T.Unknown()),
  },
  LogSegmentArchived: {
    fromSeq: Seq,
    toSeq: Seq,
    events: Count,
    firstAt: Instant,
    lastAt: Instant,
    file: Id,
    bytes: Bytes,
    sha256: T.String({ pattern: '^[0-9a-f]{64}$' }),
    reason: literals(ARCHIVE_REASONS),
  },
  LogArchiveExpired: { fromSeq: Seq, toSeq: Seq, lastAt: Instant, file: Id, bytes: Bytes },
} as const satisfies Record<string, TProperties>;

/** The name of an event type. */
export type EventType = keyof typeof EVENT_FIELDS;

/**
 * The fields this implementation added to the documented v1 vocabulary, by event type (events it
 * added, `WorkerProbeSucceeded`, `CallDialFailed`, `SessionTurnRefused` and `SessionEnded`, are all new). Readers accept every one of
 * them absent; replay does not compare one that a recorded event leaves out (docs/event-log.md).
 */
export const FIELDS_ADDED_TO_V1: {
  readonly [K in EventType]?: readonly (keyof (typeof EVENT_FIELDS)[K])[];
} = {
  RouterStarted: ['rulesVersion', 'routerId', 'takeoverFrom', 'schemaVersion'],
  WorkerRegistered: ['instanceId', 'containers', 'reportSeq'],
  WorkerUtilization: ['containers', 'reportSeq', 'standbys'],
  WorkerProbeFailed: ['error'],
  ContainerStateChanged: ['reportSeq'],
  CallRequested: ['tenantId', 'inputs', 'function', 'turnWaitMs', 'deadlineMs', 'imageKey'],
  CallPlaced: ['sessionId', 'memory'],
  CallRejected: ['sessionId'],
  CallBound: ['checkpointId'],
  CallFinished: ['code', 'message', 'raised', 'inputsRaised'],
  SessionPinned: ['requestId', 'checkpointId'],
  SessionExpired: ['causeSeq'],
  Snapshot: ['schemaVersion'],
};

/** Every event type, in the order of the vocabulary's table (docs/event-log.md). */
export const EVENT_TYPES = Object.keys(EVENT_FIELDS) as EventType[];

/**
 * What caused an append, as every event of it records (`cause`): the kind of trigger, then for
 * most kinds `:` and its subject. `start` (the router starting over its log: its start, the
 * catalogue, the recovery), `call:REQUEST` (a call got its turn: its request and placement's
 * decision), `answer:REQUEST` (the worker's first answer named the container), `end:REQUEST` (the
 * call ended), `report:WORKER` (a worker's report), `probe:WORKER` (a failed health probe),
 * `reaper` (a reaper pass), `dial:REQUEST` (the router could not open the stream to the worker a
 * call was placed on: the failed attempt and the call placed again), `session:SESSION` (a client
 * ended its session), `admit:REQUEST` (a queued call admitted: `CallAdmitted` and its
 * placement), `leave:REQUEST` (a queued call left the queue unplaced), `admin:TENANT` (an operator's
 * pin change), `routing` (the router telling workers which versions to keep, after the table or
 * the fleet changed), `archive` (the router moved a segment of its log to the archive, or deleted
 * an archive file past `ARCHIVE_RETENTION`). Events of one cause are one append, so they are contiguous.
 */
export const CAUSE_KINDS = [
  'start',
  'call',
  'admit',
  'leave',
  'answer',
  'end',
  'report',
  'probe',
  'reaper',
  'dial',
  'session',
  'admin',
  'routing',
  'archive',
] as const;
/** The kind of trigger an append records. */
export type CauseKind = (typeof CAUSE_KINDS)[number];

/**
 * A cause as events carry it: its kind, then `:` and the subject for a kind that has one. The
 * subject may be any text (`[\s\S]`, not `.`, which stops at a line break): a subject the router
 * took from a client is bounded before it gets here, but a log must never fail an append because
 * of what a subject holds.
 */
export const CAUSE_PATTERN = `^(${CAUSE_KINDS.join('|')})(:[\\s\\S]+)?$`;

const envelope = {
  seq: T.Integer({ minimum: 0 }),
  at: T.String({ pattern: ISO_INSTANT_PATTERN }),
  cause: opt(T.String({ pattern: CAUSE_PATTERN })),
};

type FieldsOf<K extends EventType> = (typeof EVENT_FIELDS)[K] extends infer P extends TProperties
  ? P
  : never;
type EnvelopeOf<K extends EventType> = {
  seq: typeof envelope.seq;
  at: typeof envelope.at;
  cause: typeof envelope.cause;
  type: TLiteral<K>;
};
type EventSchemas = { [K in EventType]: TObject<EnvelopeOf<K> & FieldsOf<K>> };

/** The full schema (envelope plus fields) of each event type. Unknown extra fields are allowed. */
export const EVENT_SCHEMAS = Object.fromEntries(
  EVENT_TYPES.map((type) => [
    type,
    T.Object({ ...envelope, type: T.Literal(type), ...EVENT_FIELDS[type] }, { $id: type }),
  ]),
) as unknown as EventSchemas;

/** True when `type` names an event type of this vocabulary. */
export function isEventType(type: unknown): type is EventType {
  return typeof type === 'string' && Object.hasOwn(EVENT_FIELDS, type);
}
