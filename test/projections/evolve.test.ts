import { expect } from 'chai';
import { InvalidEventError, type NewEvent } from '../../src/events/index.js';
import {
  evolve,
  fold,
  initialState,
  memoryCommitted,
  heldContainers,
  snapshotOf,
  type ClusterState,
} from '../../src/projections/index.js';
import { DEFAULT_CONFIG } from '../../src/shared/config.js';
import {
  atOf,
  container,
  finished,
  GiB,
  history,
  pinned,
  placed,
  registered,
  requested,
  utilization,
} from '../support/events.js';
import { residency } from '../support/routing.js';

/** The state after the history, also checking that one fold agrees with evolving event by event. */
function stateOf(h: ReturnType<typeof history>): ClusterState {
  const state = h.state();
  expect(fold(h.events), 'fold agrees with evolve').to.deep.equal(state);
  return state;
}

describe('evolve: the effect of each event', () => {
  it('RouterStarted puts the recorded config in force over the defaults', () => {
    const state = stateOf(
      history({
        type: 'RouterStarted',
        config: { MEMORY_HEADROOM: 0.8, UNKNOWN_THING: 'x' },
        version: '1.2.3',
        rulesVersion: 1,
        routerId: null,
        takeoverFrom: null,
        schemaVersion: null,
      }),
    );
    // A config recorded before the admission queue existed names no QUEUE_TIMEOUT: it ran with
    // no queue, so it reads as 0 (the setting's `unrecorded`), not today's default of 10 min.
    expect(DEFAULT_CONFIG.QUEUE_TIMEOUT).to.equal(600_000);
    expect(state.config).to.deep.equal({
      ...DEFAULT_CONFIG,
      MEMORY_HEADROOM: 0.8,
      QUEUE_TIMEOUT: 0,
    });
    expect(state.rulesVersion).to.equal(1);
    expect(state.routerVersion).to.equal('1.2.3');
    expect(state.routerStartedAt).to.equal(atOf(1));
    expect(state.lastSeq).to.equal(1);
  });

  it('CatalogueLoaded puts the catalogue in force with its revision', () => {
    const catalogue = { flavors: {}, importCosts: { numpy: 150 }, defaultImportCost: 100 };
    const state = stateOf(history({ type: 'CatalogueLoaded', revision: 'r7', catalogue }));
    expect(state.catalogue).to.deep.equal({ revision: 'r7', catalogue });
  });

  describe('WorkerRegistered', () => {
    it('adds a ready worker with its capacity and nothing reserved', () => {
      const state = stateOf(history(registered('w1', { maxContainers: 3 })));
      expect(state.workers.get('w1')).to.deep.include({
        status: 'ready',
        address: 'w1.local:50052',
        memoryTotal: 16 * GiB,
        maxContainers: 3,
        reservedMemory: 0,
        inFlight: 0,
        registeredAt: atOf(1),
        lastHeardAt: atOf(1),
      });
    });

    it('records an error status with its reason', () => {
      const state = stateOf(history(registered('w1', { status: 'error', error: 'no python' })));
      expect(state.workers.get('w1')).to.deep.include({ status: 'error', error: 'no python' });
    });

    it('brings an evicted worker back, keeping its reservations counted', () => {
      const state = stateOf(
        history(
          registered('w1'),
          placed('r1', 'w1'),
          { type: 'WorkerEvicted', workerId: 'w1', reason: 'ttl' },
          registered('w1'),
        ),
      );
      expect(state.workers.get('w1')).to.deep.include({
        status: 'ready',
        evictedReason: null,
        inFlight: 1,
        registeredAt: atOf(1),
      });
    });
  });

  describe('WorkerUtilization', () => {
    it('records the report and the time heard, and leaves probe failures to probes', () => {
      const state = stateOf(
        history(
          registered('w1'),
          { type: 'WorkerProbeFailed', workerId: 'w1', consecutive: 2, error: null },
          utilization('w1', {
            memoryUsed: 3 * GiB,
            containerCount: 2,
            cpuUsed: 1.5,
            cpuTotal: 4,
            standbys: [{ checkpointId: 'checkpoint_0', ready: 2 }],
          }),
        ),
      );
      expect(state.workers.get('w1')?.utilization).to.deep.equal({
        memoryUsed: 3 * GiB,
        containerCount: 2,
        cpuUsed: 1.5,
        cpuTotal: 4,
        gpuMemoryUsed: null,
        standbys: [{ checkpointId: 'checkpoint_0', ready: 2 }],
        at: atOf(3),
      });
      // A report proves the worker reaches the router, not that the router reaches the worker.
      expect(state.workers.get('w1')).to.deep.include({ probeFailures: 2, lastHeardAt: atOf(3) });
      expect(state.workers.get('w1')?.reportedSlots, 'its own count').to.equal(2);
    });

    it('changes nothing for an unknown or evicted worker', () => {
      const before = history(registered('w1'), {
        type: 'WorkerEvicted',
        workerId: 'w1',
        reason: 'probe',
      });
      const after = stateOf(before.add(utilization('w1'), utilization('ghost')));
      expect(after.workers.get('w1')?.utilization).to.equal(null);
      expect([...after.workers.keys()]).to.deep.equal(['w1']);
    });
  });

  it('WorkerLeaving marks the worker leaving', () => {
    const state = stateOf(history(registered('w1'), { type: 'WorkerLeaving', workerId: 'w1' }));
    expect(state.workers.get('w1')?.status).to.equal('leaving');
  });

  it('WorkerProbeFailed records the consecutive failures', () => {
    const state = stateOf(
      history(registered('w1'), {
        type: 'WorkerProbeFailed',
        workerId: 'w1',
        consecutive: 2,
        error: 'timeout',
      }),
    );
    expect(state.workers.get('w1')?.probeFailures).to.equal(2);
  });

  describe('WorkerEvicted', () => {
    const base = () =>
      history(
        registered('w1'),
        registered('w2'),
        container('w1', 'c1', 'ready'),
        pinned('s1', 'w1', 'c1', 'r0'),
        container('w2', 'c2', 'ready'),
        pinned('s2', 'w2', 'c2', 'r9'),
        { type: 'WorkerEvicted', workerId: 'w1', reason: 'probe' },
      );

    it('marks the worker evicted, drops its containers and expires the sessions pinned there', () => {
      const state = stateOf(base());
      expect(state.workers.get('w1')).to.deep.include({
        status: 'evicted',
        evictedReason: 'probe',
        containers: new Map(),
      });
      expect(state.sessions.get('s1')).to.deep.equal({
        sessionId: 's1',
        tenantId: null,
        pin: null,
        pinnedBy: null,
        expired: { reason: 'worker_evicted', at: atOf(7), seq: 7 },
      });
      expect(state.sessions.get('s2')?.pin).to.deep.equal({
        workerId: 'w2',
        containerId: 'c2',
        checkpointId: null,
      });
    });

    it('folds to the same state when the log also holds the SessionExpired consequence', () => {
      const neutral: NewEvent = {
        type: 'CallRejected',
        requestId: 'later',
        sessionId: null,
        code: 'UNAVAILABLE',
        message: 'none',
        version: null,
        routingRevision: null,
        retryAfterMs: null,
      };
      const withCause = stateOf(base().add(neutral));
      const withBoth = stateOf(
        base().add({
          type: 'SessionExpired',
          sessionId: 's1',
          reason: 'worker_evicted',
          causeSeq: null,
        }),
      );
      expect({ ...withBoth, lastSeq: 0 }).to.deep.equal({ ...withCause, lastSeq: 0 });
    });
  });

  describe('ContainerStateChanged', () => {
    it('adds a container and moves `since` only when the state changes', () => {
      const state = stateOf(
        history(
          registered('w1'),
          container('w1', 'c1', 'busy', 'ckpt-numpy'),
          container('w1', 'c1', 'busy', 'ckpt-numpy'),
          container('w1', 'c1', 'ready', 'ckpt-numpy'),
        ),
      );
      expect(state.workers.get('w1')?.containers.get('c1')).to.deep.equal({
        containerId: 'c1',
        state: 'ready',
        checkpointId: 'ckpt-numpy',
        since: atOf(4),
        reportSeq: null,
      });
      expect(heldContainers(state.workers.get('w1')!)).to.equal(1);
    });

    it('drops a removed container and expires its session; the consequence event changes nothing', () => {
      const h = history(
        registered('w1'),
        container('w1', 'c1', 'ready'),
        pinned('s1', 'w1', 'c1', 'r1'),
        container('w1', 'c1', 'removed'),
      );
      const state = stateOf(h);
      expect(state.workers.get('w1')?.containers).to.deep.equal(new Map());
      expect(state.workers.get('w1')?.pinnedSessions).to.deep.equal(new Map());
      expect(state.sessions.get('s1')?.expired).to.deep.equal({
        reason: 'container_removed',
        at: atOf(4),
        seq: 4,
      });
      const again = stateOf(
        h.add({
          type: 'SessionExpired',
          sessionId: 's1',
          reason: 'container_removed',
          causeSeq: null,
        }),
      );
      expect(again.sessions.get('s1')).to.deep.equal(state.sessions.get('s1'));
    });
  });

  it('ContainerForgotten drops the record and expires its session', () => {
    const state = stateOf(
      history(registered('w1'), container('w1', 'c1', 'ready'), pinned('s1', 'w1', 'c1'), {
        type: 'ContainerForgotten',
        workerId: 'w1',
        containerId: 'c1',
        reason: 'idle',
      }),
    );
    expect(state.workers.get('w1')?.containers).to.deep.equal(new Map());
    expect(state.sessions.get('s1')?.expired?.reason).to.equal('container_forgotten');
  });

  it('CallRequested and CallRejected reserve nothing', () => {
    const state = stateOf(
      history(registered('w1'), requested('r1'), {
        type: 'CallRejected',
        version: null,
        routingRevision: null,
        retryAfterMs: null,
        requestId: 'r1',
        sessionId: null,
        code: 'UNAVAILABLE',
        message: 'no workers available',
      }),
    );
    expect(state.reservations).to.deep.equal(new Map());
    expect(state.workers.get('w1')).to.deep.include({ inFlight: 0, reservedMemory: 0 });
  });

  it('CallPlaced reserves: in-flight +1 and the budget added to the worker', () => {
    const state = stateOf(
      history(
        registered('w1'),
        utilization('w1', { memoryUsed: GiB }),
        placed('r1', 'w1', { memory: 2 * GiB, sessionId: 's1', checkpointId: 'ckpt-numpy' }),
      ),
    );
    expect(state.reservations.get('r1')).to.deep.equal({
      requestId: 'r1',
      sessionId: 's1',
      tenantId: null,
      workerId: 'w1',
      containerId: null,
      checkpointId: 'ckpt-numpy',
      memory: 2 * GiB,
      since: atOf(3),
      unreachable: [],
    });
    expect(state.workers.get('w1')).to.deep.include({ inFlight: 1, reservedMemory: 2 * GiB });
    expect(memoryCommitted(state.workers.get('w1')!)).to.equal(3 * GiB);
  });

  it('CallBound names the container of the reservation', () => {
    const state = stateOf(
      history(registered('w1'), placed('r1', 'w1'), {
        type: 'CallBound',
        requestId: 'r1',
        containerId: 'c9',
        checkpointId: null,
      }),
    );
    expect(state.reservations.get('r1')?.containerId).to.equal('c9');
  });

  describe('CallFinished', () => {
    const pinnedByFirstCall = () =>
      history(
        registered('w1'),
        placed('r1', 'w1', { sessionId: 's1' }),
        { type: 'CallBound', requestId: 'r1', containerId: 'c1', checkpointId: null },
        pinned('s1', 'w1', 'c1', 'r1'),
      );

    it('releases the reservation and keeps the pin of a call that succeeded', () => {
      const state = stateOf(pinnedByFirstCall().add(finished('r1')));
      expect(state.reservations).to.deep.equal(new Map());
      expect(state.workers.get('w1')).to.deep.include({ inFlight: 0, reservedMemory: 0 });
      expect(state.sessions.get('s1')?.pin).to.deep.equal({
        workerId: 'w1',
        containerId: 'c1',
        checkpointId: null,
      });
    });

    it('clears the pin a failed call created; SessionUnpinned after it changes nothing', () => {
      const failed = pinnedByFirstCall().add({
        type: 'CallFinished',
        requestId: 'r1',
        ok: false,
        code: 'UNAVAILABLE',
        message: null,
        raised: null,
        inputsRaised: null,
      });
      const state = stateOf(failed);
      expect(state.sessions.get('s1')).to.deep.include({
        pin: null,
        pinnedBy: null,
        expired: null,
      });
      expect(state.workers.get('w1')?.pinnedSessions).to.deep.equal(new Map());
      const withConsequence = stateOf(
        failed.add({ type: 'SessionUnpinned', sessionId: 's1', reason: 'call_failed' }),
      );
      expect(withConsequence.sessions).to.deep.equal(state.sessions);
    });

    it('keeps the pin when a later call of the session fails', () => {
      const state = stateOf(
        pinnedByFirstCall().add(
          finished('r1'),
          placed('r2', 'w1', { sessionId: 's1', containerId: 'c1' }),
          pinned('s1', 'w1', 'c1', 'r2'),
          {
            type: 'CallFinished',
            requestId: 'r2',
            ok: false,
            code: 'INTERNAL',
            message: null,
            raised: null,
            inputsRaised: null,
          },
        ),
      );
      expect(state.sessions.get('s1')).to.deep.include({
        pinnedBy: 'r1',
        pin: { workerId: 'w1', containerId: 'c1', checkpointId: null },
      });
    });

    it('is idempotent: a second finish of the same call changes nothing', () => {
      const once = stateOf(pinnedByFirstCall().add(finished('r1')));
      const twice = stateOf(
        pinnedByFirstCall().add(finished('r1'), {
          type: 'CallFinished',
          requestId: 'r1',
          ok: false,
          code: null,
          message: null,
          raised: null,
          inputsRaised: null,
        }),
      );
      expect({ ...twice, lastSeq: 0 }).to.deep.equal({ ...once, lastSeq: 0 });
    });
  });

  it('ReservationExpired force-releases like a failed call', () => {
    const state = stateOf(
      history(
        registered('w1'),
        placed('r1', 'w1', { sessionId: 's1', memory: 3 * GiB }),
        pinned('s1', 'w1', 'c1', 'r1'),
        { type: 'ReservationExpired', requestId: 'r1' },
      ),
    );
    expect(state.reservations).to.deep.equal(new Map());
    expect(state.workers.get('w1')).to.deep.include({ inFlight: 0, reservedMemory: 0 });
    expect(state.sessions.get('s1')?.pin).to.equal(null);
  });

  describe('sessions', () => {
    it("a session's first placed call makes its record, owned by that call's tenant; the owner never changes", () => {
      const state = stateOf(
        history(
          registered('w1'),
          requested('refused-first', { sessionId: 's1', tenantId: 'tenant-b' }),
          {
            type: 'CallRejected',
            requestId: 'refused-first',
            sessionId: 's1',
            code: 'UNAVAILABLE',
            message: 'x',
            version: null,
            routingRevision: null,
            retryAfterMs: null,
          },
          requested('r1', { sessionId: 's1', tenantId: 'tenant-a' }),
          placed('r1', 'w1', { sessionId: 's1' }),
          pinned('s1', 'w1', 'c1', 'r1'),
          requested('r2', { sessionId: 's1', tenantId: 'tenant-b' }),
          placed('r2', 'w1', { sessionId: 's1', containerId: 'c1' }),
          pinned('s1', 'w1', 'c1', 'r2'),
          // A pin of a session no call was placed for takes the tenant of the call in the container.
          requested('r3', { tenantId: 'tenant-c' }),
          placed('r3', 'w1', { containerId: 'c3' }),
          pinned('s3', 'w1', 'c3'),
        ),
      );
      expect(state.sessions.get('s1')?.tenantId).to.equal('tenant-a');
      expect(state.reservations.get('r1')?.tenantId).to.equal('tenant-a');
      expect(state.sessions.get('s3')?.tenantId).to.equal('tenant-c');
    });

    it('SessionPinned pins, remembering the call that created the pin and its checkpoint', () => {
      const state = stateOf(
        history(
          registered('w1'),
          pinned('s1', 'w1', 'c1', 'r1', 'ckpt-numpy'),
          pinned('s1', 'w1', 'c1', 'r2', null),
        ),
      );
      expect(state.sessions.get('s1')).to.deep.equal({
        sessionId: 's1',
        tenantId: null,
        pin: { workerId: 'w1', containerId: 'c1', checkpointId: 'ckpt-numpy' },
        pinnedBy: 'r1',
        expired: null,
      });
      expect(state.workers.get('w1')?.pinnedSessions).to.deep.equal(new Map([['c1', 's1']]));
    });

    it('SessionPinned to a new container moves the pin', () => {
      const state = stateOf(
        history(
          registered('w1'),
          registered('w2'),
          pinned('s1', 'w1', 'c1', 'r1'),
          pinned('s1', 'w2', 'c2', 'r2'),
        ),
      );
      expect(state.sessions.get('s1')?.pin).to.deep.equal({
        workerId: 'w2',
        containerId: 'c2',
        checkpointId: null,
      });
      expect(state.workers.get('w1')?.pinnedSessions).to.deep.equal(new Map());
      expect(state.workers.get('w2')?.pinnedSessions).to.deep.equal(new Map([['c2', 's1']]));
    });

    it('SessionUnpinned drops the pin', () => {
      const state = stateOf(
        history(registered('w1'), pinned('s1', 'w1', 'c1', 'r1'), {
          type: 'SessionUnpinned',
          sessionId: 's1',
          reason: 'container_unavailable',
        }),
      );
      expect(state.sessions.get('s1')).to.deep.include({
        pin: null,
        pinnedBy: null,
        expired: null,
      });
    });

    it('SessionExpired keeps an expired record, the first reason wins, and an expired session is never re-pinned', () => {
      const state = stateOf(
        history(
          registered('w1'),
          { type: 'SessionExpired', sessionId: 's9', reason: 'container_removed', causeSeq: null },
          { type: 'SessionExpired', sessionId: 's9', reason: 'worker_evicted', causeSeq: null },
          pinned('s9', 'w1', 'c1', 'r1'),
        ),
      );
      expect(state.sessions.get('s9')).to.deep.equal({
        sessionId: 's9',
        tenantId: null,
        pin: null,
        pinnedBy: null,
        expired: { reason: 'container_removed', at: atOf(2), seq: 2 },
      });
    });
  });

  describe('Snapshot', () => {
    it('replaces the state with the one it carries, as of its seq', () => {
      const before = history(registered('w1'), placed('r1', 'w1')).state();
      const state = stateOf(
        history(registered('other'), {
          type: 'Snapshot',
          schemaVersion: 1,
          state: snapshotOf(before),
        }),
      );
      expect(state).to.deep.equal({ ...before, lastSeq: 2 });
    });

    it('restores a snapshot written before states held the rules version', () => {
      const before = history(registered('w1'), placed('r1', 'w1')).state();
      const old = snapshotOf(before);
      delete old.rulesVersion;
      const state = stateOf(
        history(registered('other'), { type: 'Snapshot', schemaVersion: 1, state: old }),
      );
      expect(state).to.deep.equal({ ...before, rulesVersion: null, lastSeq: 2 });
    });

    it("keeps a worker's measured load of a version through a snapshot, and reads one written before loads were measured", () => {
      const before = history(
        registered('w1'),
        residency('w1', 'v1', 'loading'),
        residency('w1', 'v1', 'resident'),
      ).state();
      expect(before.routing.workers.get('w1')?.versions.get('v1')?.loadMs).to.equal(1000);
      const restored = stateOf(
        history(registered('other'), {
          type: 'Snapshot',
          schemaVersion: 1,
          state: snapshotOf(before),
        }),
      );
      expect(restored.routing.workers.get('w1')?.versions.get('v1')?.loadMs).to.equal(1000);
      const old = snapshotOf(before) as {
        routing: { workers: Record<string, { versions: Record<string, { loadMs?: number }> }> };
      };
      delete old.routing.workers.w1?.versions.v1?.loadMs;
      const older = stateOf(
        history(registered('other'), { type: 'Snapshot', schemaVersion: 1, state: old }),
      );
      expect(older.routing.workers.get('w1')?.versions.get('v1')?.loadMs ?? null).to.equal(null);
    });

    it('refuses a snapshot whose state is malformed, naming the seq and the field', () => {
      const bad = snapshotOf(history(registered('w1')).state()) as {
        workers: Record<string, Record<string, unknown>>;
      };
      bad.workers.w1!.inFlight = -1;
      expect(() => history({ type: 'Snapshot', schemaVersion: 1, state: bad }).state()).to.throw(
        InvalidEventError,
        'seq 1: field "state.workers.w1.inFlight": expected an integer >= 0, got -1',
      );
    });
  });

  it('never changes the state it is given and returns a frozen state', () => {
    const h = history(registered('w1'), placed('r1', 'w1'));
    const before = h.state();
    const copy = structuredClone(before);
    const after = evolve(before, h.add(finished('r1')).events.at(-1)!);
    expect(before).to.deep.equal(copy);
    expect(Object.isFrozen(after)).to.equal(true);
    expect(Object.isFrozen(fold(h.events).workers.get('w1'))).to.equal(true);
    expect(after.workers.get('w1')?.inFlight).to.equal(0);
    expect(initialState()).to.deep.include({ lastSeq: 0, workers: new Map() });
  });
});
