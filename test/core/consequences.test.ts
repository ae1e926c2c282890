/**
 * Given / when / then tests of consequences as events (schema v2): the core decides every
 * consequence of a cause once (src/core/consequences) and the router appends it; the fold applies
 * events only. A cause alone ends no session and clears no pin; the cause with the consequences
 * the core appends after it folds to the very state a v1 fold reached from the cause (the fold as
 * it was, test/support/v1-fold.ts), the expiry naming the cause's seq.
 */
import { expect } from 'chai';
import type { Draft } from 'immer';
import { decide } from '../../src/core/decisions.js';
import { EVENT_SCHEMA_VERSION, validateEvent } from '../../src/events/index.js';
import type { ClusterEvent, EventOf, NewEvent } from '../../src/events/index.js';
import {
  applyInPlace,
  initialState,
  restoreSnapshot,
  snapshotOf,
  type ClusterState,
} from '../../src/projections/index.js';
import {
  atOf,
  container,
  finished,
  pinned,
  placed,
  registered,
  requested,
} from '../support/events.js';
import { applyEventV1 } from '../support/v1-fold.js';

/** A state as text, its maps as their entries in order (the schema version in force aside). */
function canonical(state: ClusterState): string {
  // Admission's index is derived (the v1 fold keeps none): test/projections/admission-index checks it.
  const { admission: _index, ...records } = state;
  return JSON.stringify({ ...records, schemaVersion: null }, (_key, value: unknown) =>
    value instanceof Map ? { entries: [...(value as Map<unknown, unknown>)] } : value,
  );
}

/**
 * A log written by a router of `schemaVersion` (null: one that records none, v1): each append's
 * events share one time, as the log stamps them; the state is folded today and by the v1 fold.
 */
class Log {
  readonly events: ClusterEvent[] = [];
  state: ClusterState = initialState();
  v1: ClusterState = initialState();

  constructor(schemaVersion: number | null, config: Record<string, number> = {}) {
    this.append([
      {
        type: 'RouterStarted',
        config,
        version: 'test',
        rulesVersion: null,
        routerId: null,
        takeoverFrom: null,
        schemaVersion,
      },
    ]);
  }

  /** Appends one decision's events. */
  append(events: readonly NewEvent[]): this {
    const at = atOf(this.events.length + 1);
    for (const event of events) {
      const stamped = validateEvent({ seq: this.events.length + 1, at, cause: null, ...event });
      this.events.push(stamped);
      this.state = applyInPlace(this.state, stamped);
      this.v1 = applyEventV1(this.v1 as Draft<ClusterState>, stamped);
    }
    return this;
  }

  /** The seq of the last event. */
  get lastSeq(): number {
    return this.events.length;
  }
}

/** A v2 log with w1 (instance i1) holding session s1's container c1, pinned by call r1. */
function withSession(config: Record<string, number> = {}): Log {
  return new Log(EVENT_SCHEMA_VERSION, config).append([
    registered('w1', { instanceId: 'i1' }),
    requested('r1', { sessionId: 's1' }),
    placed('r1', 'w1', { sessionId: 's1' }),
    container('w1', 'c1', 'busy'),
    pinned('s1', 'w1', 'c1', 'r1'),
  ]);
}

describe('the core: consequences are events', () => {
  it('given a v2 log, when a worker is evicted, then the eviction alone ends no session; its SessionExpired does, at the eviction', () => {
    const log = withSession();
    const made = decide('probeFailure', log.state, {
      workerId: 'w1',
      error: 'down',
      config: { ...log.state.config, PROBE_FAILURE_THRESHOLD: 1 },
    });
    const [failure, eviction, expiry] = made.events;
    expect([failure?.type, eviction?.type, expiry?.type]).to.deep.equal([
      'WorkerProbeFailed',
      'WorkerEvicted',
      'SessionExpired',
    ]);
    const evictedAt = log.lastSeq + 2;
    expect(expiry).to.deep.include({ sessionId: 's1', causeSeq: evictedAt });

    const alone = withSession().append(made.events.slice(0, 2));
    expect(alone.state.workers.get('w1')?.status).to.equal('evicted');
    expect(alone.state.sessions.get('s1')).to.deep.include({ expired: null });

    log.append(made.events);
    expect(log.state.sessions.get('s1')?.expired).to.deep.equal({
      reason: 'worker_evicted',
      at: log.events[evictedAt - 1]?.at,
      seq: evictedAt,
    });
    expect(canonical(log.state)).to.equal(canonical(log.v1));
  });

  it('given a v2 log, when its worker reports the container removed, then its session ends by the SessionExpired the core appends', () => {
    const log = withSession();
    const report = {
      workerId: 'w1',
      containerId: 'c1',
      state: 'removed' as const,
      checkpointId: null,
      instanceId: 'i1',
      reportSeq: null,
    };
    const made = decide('containerReport', log.state, report);
    expect(made.events.map((event) => event.type)).to.deep.equal([
      'ContainerStateChanged',
      'SessionExpired',
    ]);
    expect(
      withSession().append(made.events.slice(0, 1)).state.sessions.get('s1')?.expired,
    ).to.equal(null);
    log.append(made.events);
    expect(log.state.sessions.get('s1')?.expired?.seq).to.equal(log.lastSeq - 1);
    expect(canonical(log.state)).to.equal(canonical(log.v1));
  });

  it('given a v2 log, when a full report leaves the container out, then the report drops it and its session ends at the report', () => {
    const log = withSession();
    const made = decide('utilizationReport', log.state, {
      workerId: 'w1',
      memoryUsed: 0,
      containerCount: 0,
      cpuUsed: null,
      cpuTotal: null,
      gpuMemoryUsed: null,
      instanceId: 'i1',
      containers: [],
      reportSeq: 1,
    });
    expect(made.events.map((event) => event.type)).to.deep.equal([
      'WorkerUtilization',
      'ContainerStateChanged',
      'SessionExpired',
    ]);
    const alone = withSession().append(made.events.slice(0, 1)).state;
    expect(alone.workers.get('w1')?.containers.size).to.equal(0);
    expect(alone.sessions.get('s1')?.expired).to.equal(null);
    const reportAt = log.lastSeq + 1;
    log.append(made.events);
    expect(log.state.sessions.get('s1')?.expired).to.deep.include({
      reason: 'container_removed',
      seq: reportAt,
    });
    expect(canonical(log.state)).to.equal(canonical(log.v1));
  });

  it('given a v2 log, when a new process of the worker registers, then the old one is evicted first and its sessions end with it', () => {
    const log = withSession();
    const { type: _type, ...report } = registered('w1', { instanceId: 'i2' }) as NewEvent & {
      type: 'WorkerRegistered';
    };
    const made = decide('statusReport', log.state, { report: { ...report, status: 'ready' } });
    expect(made.events.map((event) => event.type)).to.deep.equal([
      'WorkerEvicted',
      'SessionExpired',
      'WorkerRegistered',
    ]);
    log.append(made.events);
    expect(log.state.sessions.get('s1')?.expired).to.deep.include({
      reason: 'worker_evicted',
      seq: log.lastSeq - 2,
    });
    expect(canonical(log.state)).to.equal(canonical(log.v1));
  });

  it('given a v2 log, when the call that created the pin fails, then the pin stays until the SessionUnpinned the core appends', () => {
    const log = withSession();
    const made = decide('end', log.state, { requestId: 'r1', code: 'INTERNAL' });
    expect(made.events.map((event) => event.type)).to.deep.equal([
      'CallFinished',
      'SessionUnpinned',
    ]);
    const alone = withSession().append(made.events.slice(0, 1)).state;
    expect(alone.sessions.get('s1')?.pin).to.not.equal(null);
    log.append(made.events);
    expect(log.state.sessions.get('s1')).to.deep.include({ pin: null, expired: null });
    expect(canonical(log.state)).to.equal(canonical(log.v1));
  });

  it('given the reaper forgets a session container, then its session ends at the ContainerForgotten', () => {
    // Idle containers the worker never reported removed are forgotten 2 s after they went idle.
    const config = { EXECUTOR_TTL: 1_000, WORKER_UTILIZATION_INTERVAL: 1_000 };
    const log = withSession(config).append([finished('r1')]);
    log.append([container('w1', 'c1', 'ready')]);
    const made = decide('reaper', log.state, { now: Date.parse(atOf(log.lastSeq)) + 3_000 });
    expect(made.events.map((event) => event.type)).to.include.members([
      'ContainerForgotten',
      'SessionExpired',
    ]);
    log.append(made.events);
    const forgotten = log.events.find((event) => event.type === 'ContainerForgotten');
    expect(log.state.sessions.get('s1')?.expired?.seq).to.equal(forgotten?.seq);
    expect(canonical(log.state)).to.equal(canonical(log.v1));
  });

  it('a log is v1 until a RouterStarted says otherwise, and a snapshot keeps the version in force', () => {
    const eviction: NewEvent = { type: 'WorkerEvicted', workerId: 'w1', reason: 'ttl' };
    // A v1 router's log: the eviction alone ends the session (the upcaster reads it so).
    const old = new Log(null).append([
      registered('w1'),
      container('w1', 'c1', 'ready'),
      pinned('s1', 'w1', 'c1'),
    ]);
    expect(old.state.schemaVersion).to.equal(1);
    old.append([eviction]);
    expect(old.state.sessions.get('s1')?.expired?.seq).to.equal(old.lastSeq);
    // The same log once a v2 router started on it: the eviction alone ends nothing.
    const upgraded = new Log(null)
      .append([registered('w1'), container('w1', 'c1', 'ready'), pinned('s1', 'w1', 'c1')])
      .append([
        {
          type: 'RouterStarted',
          config: {},
          version: 'test',
          rulesVersion: null,
          routerId: null,
          takeoverFrom: null,
          schemaVersion: EVENT_SCHEMA_VERSION,
        },
      ]);
    const snapshot = validateEvent({
      seq: upgraded.lastSeq,
      at: atOf(upgraded.lastSeq),
      type: 'Snapshot',
      schemaVersion: EVENT_SCHEMA_VERSION,
      state: snapshotOf(upgraded.state),
    });
    expect(restoreSnapshot(snapshot as EventOf<'Snapshot'>).schemaVersion).to.equal(
      EVENT_SCHEMA_VERSION,
    );
    upgraded.append([eviction]);
    expect(upgraded.state.sessions.get('s1')?.expired).to.equal(null);
  });
});
