/**
 * Given / when / then tests of the core's view of workers: failed dials, full reports, container
 * slots, instances, probe counts, and what a log in the documented vocabulary leaves to derive.
 */
import { expect } from 'chai';
import { decideDialFailure, MAX_DIAL_RETRIES } from '../../src/core/calls/dial-failure.js';
import { containerCount } from '../../src/core/placement/filters/container-count.js';
import { budgetOf, place, Verdict } from '../../src/core/placement/index.js';
import {
  decideContainerReport,
  statusReportEvents,
} from '../../src/core/registry/report-events.js';
import type { NewEvent } from '../../src/events/index.js';
import {
  restoreSnapshot,
  slotsCounted,
  slotsSeen,
  snapshotOf,
  type ClusterState,
} from '../../src/projections/index.js';
import {
  container,
  demand,
  GiB,
  history,
  pinned,
  placed,
  registered,
  requested,
  utilization,
} from '../support/events.js';

/** The container-count filter's verdict on w1 for a call of the default budget. */
const slotCheck = (state: ClusterState) =>
  containerCount.check(worker(state), budgetOf(demand(), state.config), state.config);

const call = (requestId: string, sessionId: string | null = null) => ({
  requestId,
  sessionId,
  demand: demand(),
});

/** A full report numbered `reportSeq`. */
function fullReport(
  workerId: string,
  reportSeq: number,
  containers: [string, 'busy' | 'ready' | 'error'][],
): NewEvent {
  return utilization(workerId, {
    containerCount: containers.length,
    containers: containers.map(([containerId, state]) => ({
      containerId,
      state,
      checkpointId: null,
    })),
    reportSeq,
  });
}

const bound = (requestId: string, containerId: string): NewEvent => ({
  type: 'CallBound',
  requestId,
  containerId,
  checkpointId: null,
});
const finished = (requestId: string, ok = true): NewEvent => ({
  type: 'CallFinished',
  requestId,
  ok,
  code: ok ? null : 'INTERNAL',
  message: null,
  raised: null,
  inputsRaised: null,
});

function worker(state: ClusterState, workerId = 'w1') {
  return state.workers.get(workerId)!;
}

describe('the core: a failed dial', () => {
  it('records the attempt, counts a failed probe, and places the call again without that worker', () => {
    const given = history(registered('a'), registered('b'), requested('r1'), placed('r1', 'a'));
    const made = decideDialFailure(given.state(), {
      call: call('r1'),
      workerId: 'a',
      error: 'connect ECONNREFUSED',
    });
    expect(made.cause).to.deep.equal({ kind: 'dial', requestId: 'r1' });
    expect(made.attempts, 'this attempt was the first').to.equal(1);
    expect(made.events.map((event) => event.type)).to.deep.equal([
      'CallDialFailed',
      'WorkerProbeFailed',
      'CallPlaced',
    ]);
    expect(made.events[1]).to.deep.include({ workerId: 'a', consecutive: 1 });
    expect(made.placement).to.deep.include({ outcome: 'placed', workerId: 'b' });
    const after = given.add(...made.events).state();
    expect(worker(after, 'a')).to.deep.include({ inFlight: 0, reservedMemory: 0 });
    expect(after.reservations.get('r1')).to.deep.include({ workerId: 'b', unreachable: ['a'] });
  });

  it('evicts the worker at the threshold in the same decision, and gives up after the last attempt', () => {
    const given = history(
      {
        type: 'RouterStarted',
        config: { PROBE_FAILURE_THRESHOLD: 2 },
        version: 't',
        rulesVersion: 2,
        routerId: null,
        takeoverFrom: null,
        schemaVersion: null,
      },
      registered('a'),
      registered('b'),
      registered('c'),
      { type: 'WorkerProbeFailed', workerId: 'a', consecutive: 1, error: null },
      requested('r1'),
      placed('r1', 'a'),
    );
    const first = decideDialFailure(given.state(), { call: call('r1'), workerId: 'a', error: 'x' });
    expect(first.events.map((event) => event.type)).to.deep.equal([
      'CallDialFailed',
      'WorkerProbeFailed',
      'WorkerEvicted',
      'CallPlaced',
    ]);
    given.add(...first.events);
    const second = decideDialFailure(given.state(), {
      call: call('r1'),
      workerId: 'b',
      error: 'y',
    });
    expect(second.placement).to.deep.include({ outcome: 'placed', workerId: 'c' });
    given.add(...second.events);
    expect(MAX_DIAL_RETRIES).to.equal(2);
    const third = decideDialFailure(given.state(), { call: call('r1'), workerId: 'c', error: 'z' });
    expect(third.attempts).to.equal(3);
    expect(third.placement).to.deep.include({
      outcome: 'rejected',
      code: 'UNAVAILABLE',
      message: 'the router could not open a stream to a, b, c (3 attempts); last: z',
    });
    expect(third.events.at(-1)).to.deep.include({ type: 'CallRejected', code: 'UNAVAILABLE' });
    const after = given.add(...third.events).state();
    expect(after.reservations.size).to.equal(0);
    expect(after.pendingCalls.size).to.equal(0);
  });

  it("refuses a session's call whose container is on the unreachable worker, and as expired when the dial evicts it", () => {
    const setup = (threshold: number) =>
      history(
        {
          type: 'RouterStarted',
          config: { PROBE_FAILURE_THRESHOLD: threshold },
          version: 't',
          rulesVersion: 2,
          routerId: null,
          takeoverFrom: null,
          schemaVersion: null,
        },
        registered('a'),
        registered('b'),
        container('a', 'c1', 'ready', 'checkpoint_0'),
        pinned('s1', 'a', 'c1', 'r0'),
        requested('r1', { sessionId: 's1' }),
        placed('r1', 'a', { sessionId: 's1', containerId: 'c1' }),
      );
    const kept = decideDialFailure(setup(3).state(), {
      call: call('r1', 's1'),
      workerId: 'a',
      error: 'x',
    });
    expect(kept.placement).to.deep.include({ outcome: 'rejected', code: 'UNAVAILABLE' });
    expect((kept.placement as { message: string }).message).to.match(
      /^session s1 lives in container c1 on worker a, which the router could not reach/,
    );
    const given = setup(1);
    const evicted = decideDialFailure(given.state(), {
      call: call('r1', 's1'),
      workerId: 'a',
      error: 'x',
    });
    const evictedAt = given.lastSeq + 3;
    expect(evicted.events.map((event) => event.type)).to.deep.equal([
      'CallDialFailed',
      'WorkerProbeFailed',
      'WorkerEvicted',
      'SessionExpired',
      'CallRejected',
    ]);
    expect(evicted.placement).to.deep.include({
      code: 'NOT_FOUND',
      message: `session expired: session s1 ended at seq ${evictedAt} (worker_evicted)`,
    });
    // The same words placement says to the session's next call.
    const after = given.add(...evicted.events).state();
    expect(place(after, call('r2', 's1'))).to.deep.include({
      outcome: 'rejected',
      message: `session expired: session s1 ended at seq ${evictedAt} (worker_evicted)`,
    });
  });
});

describe('the core: container slots', () => {
  const at = (state: ClusterState) => ({
    seen: slotsSeen(worker(state)),
    counted: slotsCounted(worker(state)),
    idle: worker(state).idleContainers,
  });

  it('counts a call in flight once, reported or not, and a container whose call ended only when kept', () => {
    const given = history(
      registered('w1', { maxContainers: 2 }),
      requested('r1'),
      placed('r1', 'w1'),
    );
    expect(at(given.state())).to.deep.equal({ seen: 1, counted: 1, idle: 0 });
    given.add(container('w1', 'c1', 'busy'));
    expect(at(given.state()), 'its container reported: still one').to.deep.include({ seen: 1 });
    given.add(bound('r1', 'c1'));
    expect(at(given.state()), 'bound: still one').to.deep.include({ seen: 1 });
    given.add(finished('r1'));
    expect(at(given.state()), 'ended, being destroyed: none').to.deep.include({ seen: 0 });
    // A session's container is kept after a call that succeeded.
    given.add(requested('r2', { sessionId: 's1' }), placed('r2', 'w1', { sessionId: 's1' }));
    given.add(container('w1', 'c2', 'busy'), bound('r2', 'c2'), pinned('s1', 'w1', 'c2', 'r2'));
    given.add(finished('r2'));
    expect(at(given.state()), 'kept for its session').to.deep.equal({
      seen: 1,
      counted: 1,
      idle: 1,
    });
    given.add(container('w1', 'c2', 'ready'));
    expect(at(given.state()).seen).to.equal(1);
    // Reusing it: one call, one slot.
    given.add(
      requested('r3', { sessionId: 's1' }),
      placed('r3', 'w1', { sessionId: 's1', containerId: 'c2' }),
    );
    expect(at(given.state())).to.deep.equal({ seen: 1, counted: 1, idle: 0 });
    expect(slotCheck(given.state())).to.equal(Verdict.pass);
    given.add(requested('r4'), placed('r4', 'w1'));
    expect(slotCheck(given.state())).to.equal(Verdict.fail);
  });

  it("never counts fewer than the worker's own count, moved by what happened since", () => {
    const given = history(
      registered('w1', { maxContainers: 4 }),
      utilization('w1', { containerCount: 3 }),
    );
    expect(at(given.state())).to.deep.equal({ seen: 0, counted: 3, idle: 0 });
    given.add(requested('r1'), placed('r1', 'w1'));
    expect(at(given.state()).counted, 'a new container since').to.equal(4);
    given.add(finished('r1'));
    expect(at(given.state()).counted, 'its container goes').to.equal(3);
    given.add(container('w1', 'c-idle', 'ready'), container('w1', 'c-idle', 'removed'));
    expect(at(given.state()).counted, 'an idle one removed').to.equal(2);
    given.add(fullReport('w1', 5, [['c-listed', 'ready']]));
    expect(worker(given.state()).reportedSlots, 'a full report: the records are its word').to.equal(
      null,
    );
    expect(at(given.state())).to.deep.equal({ seen: 1, counted: 1, idle: 1 });
  });
});

describe('the core: full reports', () => {
  it('drops what they no longer list (expiring its session), keeps what was reported after them, and ignores an older one', () => {
    const given = history(
      registered('w1'),
      container('w1', 'c-old', 'busy', null, 1),
      container('w1', 'c-pinned', 'ready', null, 2),
      pinned('s1', 'w1', 'c-pinned'),
      container('w1', 'c-new', 'busy', null, 9),
    );
    expect(worker(given.state()).containers.size).to.equal(3);
    given.add(fullReport('w1', 8, [['c-pinned', 'ready']]));
    let state = given.state();
    expect([...worker(state).containers.keys()].sort()).to.deep.equal(['c-new', 'c-pinned']);
    expect(state.sessions.get('s1')?.expired).to.equal(null);
    given.add(fullReport('w1', 10, [['c-new', 'busy']]));
    state = given.state();
    expect([...worker(state).containers.keys()]).to.deep.equal(['c-new']);
    expect(state.sessions.get('s1')?.expired?.reason).to.equal('container_removed');
    given.add(
      fullReport('w1', 7, [
        ['c-pinned', 'ready'],
        ['c-ghost', 'busy'],
      ]),
    );
    expect([...worker(given.state()).containers.keys()], 'stale: nothing changes').to.deep.equal([
      'c-new',
    ]);
    given.add(container('w1', 'c-late', 'busy', null, 6));
    expect(
      worker(given.state()).containers.has('c-late'),
      'a report older than the last full one',
    ).to.equal(false);
    given.add(container('w1', 'c-new', 'ready', null, 4));
    expect(worker(given.state()).containers.get('c-new')?.state, 'older than its record').to.equal(
      'busy',
    );
  });

  it('the registry appends the removal of each container a full report drops, with its session', () => {
    const given = history(
      registered('w1', { instanceId: 'i1' }),
      container('w1', 'c1', 'ready', 'checkpoint_0', 1),
      pinned('s1', 'w1', 'c1'),
    );
    const outcome = statusReportEvents(given.state(), {
      workerId: 'w1',
      status: 'ready',
      address: 'w1.local:50052',
      error: null,
      flavor: 'cpu',
      memoryTotal: 16 * GiB,
      maxContainers: 8,
      gpuMemoryTotal: null,
      instanceId: 'i1',
      containers: [],
      reportSeq: 3,
    });
    expect(outcome.kind === 'events' && outcome.events.map((event) => event.type)).to.deep.equal([
      'WorkerRegistered',
      'ContainerStateChanged',
      'SessionExpired',
    ]);
    // The fold agrees with or without the consequences.
    const events = outcome.kind === 'events' ? outcome.events : [];
    const withBoth = given.add(...events).state();
    expect(worker(withBoth).containers.size).to.equal(0);
  });
});

describe('the core: a removal logged once', () => {
  const removal = (containerId: string, reportSeq: number) =>
    decideContainerReport(given().state(), {
      workerId: 'w1',
      containerId,
      state: 'removed',
      checkpointId: null,
      instanceId: 'i1',
      reportSeq,
    });
  // A full report taken while the worker tore c1 down no longer lists it: c1 is removed then.
  const given = () =>
    history(
      registered('w1', { instanceId: 'i1' }),
      container('w1', 'c1', 'busy', null, 1),
      container('w1', 'c2', 'ready', null, 2),
      pinned('s2', 'w1', 'c2'),
      fullReport('w1', 3, [['c2', 'ready']]),
      container('w1', 'c1', 'removed', null, 3),
    );

  it("the worker's own later report of a container no record and no session holds changes nothing", () => {
    const made = removal('c1', 4);
    expect(made.registered).to.equal(true);
    expect(made.events).to.deep.equal([]);
  });

  it('a removal of a recorded container is logged, with its session; one of a session alone too', () => {
    expect(removal('c2', 4).events.map((event) => event.type)).to.deep.equal([
      'ContainerStateChanged',
      'SessionExpired',
    ]);
    // A session pinned on the call's first answer, before any report of its container.
    const early = history(registered('w1', { instanceId: 'i1' }), pinned('s3', 'w1', 'c3'));
    const made = decideContainerReport(early.state(), {
      workerId: 'w1',
      containerId: 'c3',
      state: 'removed',
      checkpointId: null,
      instanceId: 'i1',
      reportSeq: 1,
    });
    expect(made.events).to.deep.include({
      type: 'SessionExpired',
      sessionId: 's3',
      reason: 'container_removed',
      // Ended by the removal, the decision's first event.
      causeSeq: early.lastSeq + 1,
    });
  });
});

describe('the core: instances and probe counts', () => {
  it("a new instance's registration ends the old one's containers and sessions; the count starts over", () => {
    const given = history(
      registered('w1', { instanceId: 'i1' }),
      container('w1', 'c1', 'ready'),
      pinned('s1', 'w1', 'c1'),
      { type: 'WorkerProbeFailed', workerId: 'w1', consecutive: 2, error: null },
      registered('w1', { instanceId: 'i2' }),
    );
    const state = given.state();
    expect(worker(state)).to.deep.include({ instanceId: 'i2', probeFailures: 0, status: 'ready' });
    expect(worker(state).containers.size).to.equal(0);
    expect(state.sessions.get('s1')?.expired?.reason).to.equal('worker_evicted');
  });

  /** A session's call placed on its reused container, and that state's snapshot as JSON. */
  const reusedContainerSnapshot = () => {
    const given = history(
      registered('w1'),
      container('w1', 'c1', 'ready'),
      requested('r1', { sessionId: 's1' }),
      placed('r1', 'w1', { sessionId: 's1', containerId: 'c1' }),
    );
    return {
      given,
      snapshot: snapshotOf(given.state()) as Record<string, Record<string, unknown>>,
    };
  };
  const snapshotEvent = (state: Record<string, Record<string, unknown>>) => ({
    seq: 10,
    at: '2026-11-30T10:00:10.000Z',
    cause: null,
    type: 'Snapshot' as const,
    schemaVersion: 1,
    state,
  });

  it('a snapshot from before these parts existed restores them at their defaults, derived again', () => {
    const { snapshot } = reusedContainerSnapshot();
    // Written by an earlier version: none of the parts this one added.
    delete snapshot.pendingCalls;
    const old = snapshot.workers as Record<string, Record<string, unknown>>;
    for (const key of [
      'instanceId',
      'callContainers',
      'idleContainers',
      'reportedSlots',
      'lastFullReportSeq',
    ]) {
      delete old.w1![key];
    }
    delete (old.w1!.containers as Record<string, Record<string, unknown>>).c1!.reportSeq;
    delete (snapshot.reservations as Record<string, Record<string, unknown>>).r1!.unreachable;
    const restored = restoreSnapshot(snapshotEvent(snapshot));
    expect(worker(restored)).to.deep.include({
      instanceId: null,
      reportedSlots: null,
      idleContainers: 0,
    });
    expect([...worker(restored).callContainers]).to.deep.equal([['c1', ['r1']]]);
    expect(slotsSeen(worker(restored)), 'the reused container is not counted twice').to.equal(1);
    expect(restored.reservations.get('r1')?.unreachable).to.deep.equal([]);
    expect(restored.pendingCalls.size).to.equal(0);
  });

  it('a snapshot that named one call a container (as earlier versions wrote) restores the lists', () => {
    const { given, snapshot } = reusedContainerSnapshot();
    const old = snapshot.workers as Record<string, Record<string, unknown>>;
    expect(old.w1!.callContainers).to.deep.equal({ c1: ['r1'] });
    old.w1!.callContainers = { c1: 'r1' };
    const restored = restoreSnapshot(snapshotEvent(snapshot));
    expect(restored.workers).to.deep.equal(given.state().workers);
  });
});
