/**
 * The documented v1 event vocabulary, written down here independently of the product's schemas:
 * each event type with exactly the fields of the seed's table and nothing this implementation
 * added. `toV1` turns an event of the log into what a v1 writer would have written.
 */
import type { ClusterEvent } from '../../src/events/index.js';

/** The v1 fields of each v1 event type (the envelope is `seq`, `at`, `type`: no `cause`). */
export const V1_FIELDS: Readonly<Record<string, readonly string[]>> = {
  RouterStarted: ['config', 'version'],
  CatalogueLoaded: ['revision', 'catalogue'],
  WorkerRegistered: [
    'workerId',
    'address',
    'status',
    'error',
    'flavor',
    'memoryTotal',
    'maxContainers',
    'gpuMemoryTotal',
  ],
  WorkerUtilization: [
    'workerId',
    'memoryUsed',
    'containerCount',
    'cpuUsed',
    'cpuTotal',
    'gpuMemoryUsed',
  ],
  WorkerLeaving: ['workerId'],
  WorkerProbeFailed: ['workerId', 'consecutive'],
  WorkerEvicted: ['workerId', 'reason'],
  ContainerStateChanged: ['workerId', 'containerId', 'state', 'checkpointId'],
  ContainerForgotten: ['workerId', 'containerId', 'reason'],
  CallRequested: ['requestId', 'sessionId', 'demand'],
  CallPlaced: [
    'requestId',
    'workerId',
    'containerId',
    'checkpointId',
    'packages',
    'skippedPackages',
  ],
  CallRejected: ['requestId', 'code', 'message'],
  CallBound: ['requestId', 'containerId'],
  CallFinished: ['requestId', 'ok'],
  ReservationExpired: ['requestId'],
  SessionPinned: ['sessionId', 'workerId', 'containerId'],
  SessionUnpinned: ['sessionId', 'reason'],
  SessionExpired: ['sessionId', 'reason'],
  Snapshot: ['state'],
};

/** The demand's v1 fields (all of them optional there too). */
const V1_DEMAND = [
  'memory',
  'gpuMemory',
  'gpu',
  'disableOptimizedExecution',
  'checkpointId',
  'imports',
  'packages',
];

/** Whether an event exists in the v1 vocabulary at all. */
export function isV1Event(event: ClusterEvent): boolean {
  return Object.hasOwn(V1_FIELDS, event.type);
}

/**
 * The event as a v1 writer writes it: envelope and v1 fields only, optional ones left out when
 * unknown (`null`), as the seed allows readers to expect.
 */
export function toV1(event: ClusterEvent): Record<string, unknown> {
  const fields = V1_FIELDS[event.type];
  if (!fields) throw new Error(`${event.type} is not in the v1 vocabulary`);
  const source = event as unknown as Record<string, unknown>;
  const written: Record<string, unknown> = { seq: event.seq, at: event.at, type: event.type };
  for (const field of fields) {
    const value = source[field];
    if (value === null || value === undefined) continue;
    if (field === 'demand') {
      const demand = value as Record<string, unknown>;
      written.demand = Object.fromEntries(
        V1_DEMAND.filter((key) => demand[key] !== null && demand[key] !== undefined).map((key) => [
          key,
          demand[key],
        ]),
      );
    } else written[field] = value;
  }
  return written;
}
