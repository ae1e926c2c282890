/**
 * Builders of events with sensible defaults, and a `history` that stamps them (seq from 1, one
 * second apart) and folds them with `evolve`, for given / when / then tests.
 */
import {
  validateEvent,
  type ClusterEvent,
  type Demand,
  type NewEvent,
  type NewEventOf,
} from '../../src/events/index.js';
import { evolve, fold, initialState, type ClusterState } from '../../src/projections/index.js';
import { PLACEMENT_RULES_VERSION } from '../../src/core/placement/rules-version.js';

export const GiB = 1024 ** 3;
export const START_MS = Date.UTC(2026, 10, 30, 10, 0, 0, 0);

/** The `at` of the event with this seq in a `history` (one second apart from START_MS). */
export function atOf(seq: number): string {
  return new Date(START_MS + seq * 1000).toISOString();
}

/**
 * The router starting with `config` (by env name) under the placement rules `rulesVersion`
 * (default: this code's, so the admission rules are in force).
 */
export function started(
  config: Record<string, number> = {},
  rulesVersion: number | null = PLACEMENT_RULES_VERSION,
): NewEvent {
  return {
    type: 'RouterStarted',
    config,
    version: 'test',
    rulesVersion,
    routerId: null,
    takeoverFrom: null,
    schemaVersion: 2,
  };
}

/** A ready CPU worker with 16 GiB and room for 8 containers. */
export function registered(
  workerId: string,
  fields: Partial<NewEventOf<'WorkerRegistered'>> = {},
): NewEvent {
  return {
    type: 'WorkerRegistered',
    workerId,
    address: `${workerId}.local:50052`,
    status: 'ready',
    error: null,
    flavor: 'cpu',
    memoryTotal: 16 * GiB,
    maxContainers: 8,
    gpuMemoryTotal: null,
    instanceId: null,
    containers: null,
    reportSeq: null,
    ...fields,
  };
}

/** A load report. */
export function utilization(
  workerId: string,
  fields: Partial<NewEventOf<'WorkerUtilization'>> = {},
): NewEvent {
  return {
    type: 'WorkerUtilization',
    workerId,
    memoryUsed: 0,
    containerCount: 0,
    cpuUsed: null,
    cpuTotal: null,
    gpuMemoryUsed: null,
    containers: null,
    reportSeq: null,
    standbys: null,
    ...fields,
  };
}

/** A demand with every optional part unset. */
export function demand(fields: Partial<Demand> = {}): Demand {
  return {
    memory: null,
    gpuMemory: null,
    gpu: null,
    disableOptimizedExecution: null,
    checkpointId: null,
    imports: null,
    packages: null,
    pinned: null,
    ...fields,
  };
}

/** A call reaching placement. */
export function requested(
  requestId: string,
  fields: Partial<NewEventOf<'CallRequested'>> = {},
): NewEvent {
  return {
    type: 'CallRequested',
    requestId,
    sessionId: null,
    tenantId: null,
    demand: demand(),
    retryOf: null,
    inputs: null,
    function: null,
    turnWaitMs: null,
    deadlineMs: null,
    imageKey: null,
    ...fields,
  };
}

/** A placement decision and its reservation (1 GiB unless told). */
export function placed(
  requestId: string,
  workerId: string,
  fields: Partial<NewEventOf<'CallPlaced'>> = {},
): NewEvent {
  return {
    type: 'CallPlaced',
    requestId,
    sessionId: null,
    workerId,
    containerId: null,
    checkpointId: null,
    packages: [],
    skippedPackages: [],
    memory: GiB,
    version: null,
    routingRevision: null,
    coldLoad: false,
    ...fields,
  };
}

/** A call that finished well (no error, nothing raised). */
export function finished(requestId: string): NewEvent {
  return {
    type: 'CallFinished',
    requestId,
    ok: true,
    code: null,
    message: null,
    raised: null,
    inputsRaised: null,
  };
}

/** A container report. */
export function container(
  workerId: string,
  containerId: string,
  state: NewEventOf<'ContainerStateChanged'>['state'],
  checkpointId: string | null = null,
  reportSeq: number | null = null,
): NewEvent {
  return { type: 'ContainerStateChanged', workerId, containerId, state, checkpointId, reportSeq };
}

/** A session pinned to a container by a call. */
export function pinned(
  sessionId: string,
  workerId: string,
  containerId: string,
  requestId: string | null = null,
  checkpointId: string | null = null,
): NewEvent {
  return { type: 'SessionPinned', sessionId, workerId, containerId, requestId, checkpointId };
}

/** Events stamped as a log would stamp them, and the state they fold to. */
export class History {
  readonly events: ClusterEvent[] = [];

  /** Stamps and appends events (validating them as the log would). */
  add(...events: NewEvent[]): this {
    for (const { type, ...fields } of events) {
      const seq = this.events.length + 1;
      this.events.push(validateEvent({ seq, at: atOf(seq), type, ...fields }));
    }
    return this;
  }

  /** The state after every event, folded one by one with `evolve`. */
  state(): ClusterState {
    return this.events.reduce(evolve, initialState());
  }

  /** The seq of the last event. */
  get lastSeq(): number {
    return this.events.length;
  }
}

/** A new history holding `events`. */
export function history(...events: NewEvent[]): History {
  return new History().add(...events);
}

/**
 * The state a log's events fold to without its `Snapshot` events (their seqs still count), so a
 * test comparing with a live state does not take the answer from the snapshots under test.
 */
export function foldWithoutSnapshots(events: readonly ClusterEvent[]): ClusterState {
  const state = fold(events.filter((event) => event.type !== 'Snapshot'));
  return { ...state, lastSeq: events.at(-1)?.seq ?? state.lastSeq };
}
