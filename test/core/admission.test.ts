/**
 * The admission queue, given / when / then (docs/placement.md, "The admission queue"): given a
 * cluster's log, when calls arrive or capacity frees, then the core's decisions queue, admit in
 * fair order, and let calls leave, all as events; with no QUEUE_TIMEOUT (or a log recorded
 * before the queue) every call that finds no room is refused at once, as before.
 */
import { expect } from 'chai';
import { MAX_QUEUED } from '../../src/core/admission/index.js';
import { decide } from '../../src/core/decisions.js';
import type { Demand, NewEvent } from '../../src/events/index.js';
import { evolve, fold, type ClusterState } from '../../src/projections/index.js';
import { snapshotOf } from '../../src/projections/snapshot.js';
import { validateEvent } from '../../src/events/index.js';
import {
  atOf,
  demand,
  finished,
  GiB,
  history,
  type History,
  registered,
  requested,
  started,
} from '../support/events.js';

const QUEUE = { QUEUE_TIMEOUT: 600_000 };

/** Appends a decision's events to `given`, as the router would. */
function record(given: History, events: readonly NewEvent[]): ClusterState {
  given.add(...events);
  return given.state();
}

/** A call of `tenantId` with `fields` of demand, decided against `given` and recorded. */
function call(
  given: History,
  requestId: string,
  tenantId: string | null,
  fields: Partial<Demand> = {},
) {
  // Folded in place (`fold`), not event by event with immer: the maxQueued case folds 4,000 events.
  const made = decide('call', fold(given.events), {
    call: { requestId, sessionId: null, tenantId, demand: demand(fields) },
  });
  given.add(...made.events);
  return made;
}

/** One worker with `slots` container slots, the queue in force. */
function cluster(slots: number, config: Record<string, number> = QUEUE): History {
  return history(started(config), registered('w1', { maxContainers: slots }));
}

describe('admission queue', () => {
  it('a call that does not fit now waits (CallQueued, why), reads as queued, and is not refused', () => {
    const given = cluster(1);
    expect(call(given, 'a1', 'a').placement.outcome).to.equal('placed');
    const made = call(given, 'b1', 'b');
    expect(made.queued).to.contain('no worker can accept this request');
    expect(made.events.map((e) => e.type)).to.deep.equal(['CallRequested', 'CallQueued']);
    expect([...given.state().queue.keys()]).to.deep.equal(['b1']);
  });

  it('QUEUE_TIMEOUT=0, or a log recorded before the queue (no QUEUE_TIMEOUT, or rules 4), refuses at once as before', () => {
    for (const given of [
      cluster(1, { QUEUE_TIMEOUT: 0 }),
      cluster(1, {}),
      history(started(QUEUE, 4), registered('w1', { maxContainers: 1 })),
    ]) {
      call(given, 'a1', 'a');
      const made = call(given, 'b1', 'b');
      expect(made.queued).to.equal(null);
      expect(made.events.at(-1)).to.deep.include({
        type: 'CallRejected',
        code: 'RESOURCE_EXHAUSTED',
        message: 'no worker can accept this request (1 candidate: container-count ruled out 1)',
      });
    }
  });

  it('a call that never fits is refused at once even with the queue', () => {
    const given = cluster(1);
    const made = call(given, 'big', 'a', { memory: 100 * GiB });
    expect(made.queued).to.equal(null);
    expect(made.events.at(-1)).to.deep.include({
      type: 'CallRejected',
      code: 'RESOURCE_EXHAUSTED',
    });
    expect(given.state().queue.size).to.equal(0);
  });

  it('admits nothing while nothing fits; when a call finishes, the head is admitted and placed', () => {
    const given = cluster(1);
    call(given, 'a1', 'a');
    call(given, 'b1', 'b');
    expect(decide('admit', given.state(), {}).events).to.deep.equal([]);
    given.add(finished('a1'));
    const admitted = decide('admit', given.state(), {});
    expect(admitted.requestId).to.equal('b1');
    expect(admitted.cause).to.deep.equal({ kind: 'admit', requestId: 'b1' });
    expect(admitted.events.map((e) => e.type)).to.deep.equal(['CallAdmitted', 'CallPlaced']);
    const state = record(given, admitted.events);
    expect(state.queue.size).to.equal(0);
    expect(state.reservations.get('b1')?.workerId).to.equal('w1');
  });

  it("first come, first served within a tenant: a later call waits behind its tenant's queued one even when it fits", () => {
    const given = history(
      started(QUEUE),
      registered('w1', { maxContainers: 1, memoryTotal: 16 * GiB }),
      registered('w2', { maxContainers: 1, memoryTotal: 4 * GiB }),
    );
    call(given, 'x', 'other');
    // w1 is taken; a 8 GiB call of a does not fit w2 now and waits.
    expect(call(given, 'a-big', 'a', { memory: 8 * GiB }).queued).to.not.equal(null);
    // A small call of a would fit w2, but a's big call came first.
    expect(call(given, 'a-small', 'a').queued).to.equal('1 earlier call of its tenant wait first');
    // Another tenant's small call is not blocked behind a's.
    expect(call(given, 'b-small', 'b').placement.outcome).to.equal('placed');
    expect(given.state().reservations.get('b-small')?.workerId).to.equal('w2');
  });

  it('fair order: the tenant holding fewer slots goes first whatever the arrival order; ties by tenant ID', () => {
    const given = cluster(4);
    for (const id of ['a1', 'a2', 'a3']) call(given, id, 'a');
    call(given, 'c1', 'c');
    // Full: a holds 3, c holds 1. Then queued in this order: a4, c2, b1.
    call(given, 'a4', 'a');
    call(given, 'c2', 'c');
    call(given, 'b1', 'b');
    expect([...given.state().queue.keys()]).to.deep.equal(['a4', 'c2', 'b1']);
    const order: string[] = [];
    for (const requestId of ['a1', 'a2', 'a3']) {
      given.add(finished(requestId));
      const admitted = decide('admit', given.state(), {});
      order.push(admitted.requestId ?? 'none');
      record(given, admitted.events);
    }
    // Slots held when each slot frees: a 2, b 0, c 1 -> b1; a 1, b 1, c 1 -> a4 (ties by
    // tenant ID); then c2 is the only one left.
    expect(order).to.deep.equal(['b1', 'a4', 'c2']);
  });

  it("a head that does not fit now is passed over for the next tenant's head that does", () => {
    const given = history(
      started(QUEUE),
      registered('w1', { maxContainers: 2, memoryTotal: 10 * GiB }),
    );
    call(given, 'x1', 'x', { memory: 4 * GiB });
    call(given, 'x2', 'x', { memory: 4 * GiB });
    call(given, 'a-big', 'a', { memory: 8 * GiB });
    call(given, 'b-small', 'b', { memory: GiB });
    given.add(finished('x1'));
    // 4 GiB in use of 9 GiB allowed: a's 8 GiB head waits, b's 1 GiB head goes.
    const admitted = decide('admit', given.state(), {});
    expect(admitted.requestId).to.equal('b-small');
  });

  it('a tenant with maxQueued (2,000) calls waiting is refused at once, with a retry-after hint; others still queue', () => {
    const given = cluster(1);
    call(given, 'a1', 'a');
    const queuedEvents: NewEvent[] = [];
    for (let i = 0; i < MAX_QUEUED; i += 1) {
      const requestId = `t-${i}`;
      queuedEvents.push(requested(requestId, { tenantId: 't' }), {
        type: 'CallQueued',
        requestId,
        sessionId: null,
        tenantId: 't',
        demand: demand(),
        retryOf: null,
        why: 'no room',
      });
    }
    given.add(...queuedEvents);
    const full = call(given, 'one-more', 't');
    expect(full.queued).to.equal(null);
    expect(full.placement).to.deep.include({ outcome: 'rejected', retryAfterMs: 2_000 });
    expect(full.events.at(-1)).to.deep.include({
      type: 'CallRejected',
      code: 'RESOURCE_EXHAUSTED',
      retryAfterMs: 2_000,
      message:
        'the admission queue holds 2000 calls of tenant t, the most it keeps (maxQueued 2000): retry in 2000ms',
    });
    expect(call(given, 'u1', 'u').queued).to.not.equal(null);
  });

  it('a queued call leaves the queue: CallLeftQueue (timeout, cancelled, deadline), and nothing for one already gone', () => {
    const given = cluster(1);
    call(given, 'a1', 'a');
    call(given, 'b1', 'b');
    const left = decide('leaveQueue', given.state(), {
      requestId: 'b1',
      reason: 'timeout',
      code: 'RESOURCE_EXHAUSTED',
      message: 'queued for 10m: ...',
    });
    expect(left.cause).to.deep.equal({ kind: 'leave', requestId: 'b1' });
    const state = record(given, left.events);
    expect(state.queue.size).to.equal(0);
    expect(state.pendingCalls.has('b1')).to.equal(false);
    const again = decide('leaveQueue', state, {
      requestId: 'b1',
      reason: 'cancelled',
      code: 'CANCELLED',
      message: 'x',
    });
    expect(again.events).to.deep.equal([]);
  });

  it('the router starting over a log with queued calls lets them leave (restart)', () => {
    const given = cluster(1);
    call(given, 'a1', 'a');
    call(given, 'b1', 'b');
    const start = decide('start', given.state(), { config: given.state().config, version: 't' });
    expect(start.events.filter((e) => e.type === 'CallLeftQueue')).to.deep.equal([
      {
        type: 'CallLeftQueue',
        requestId: 'b1',
        reason: 'restart',
        code: 'UNAVAILABLE',
        message: 'the router restarted while the call waited in its queue',
      },
    ]);
  });

  it('the queue survives a snapshot, in its order', () => {
    const given = cluster(1);
    call(given, 'a1', 'a');
    for (const id of ['q3', 'q1', 'q2']) call(given, id, 't');
    const state = given.state();
    const restored = evolve(
      state,
      validateEvent({
        seq: given.lastSeq + 1,
        at: atOf(given.lastSeq + 1),
        type: 'Snapshot',
        schemaVersion: 2,
        state: JSON.parse(JSON.stringify(snapshotOf(state))) as Record<string, unknown>,
      }),
    );
    expect([...restored.queue.keys()]).to.deep.equal(['q3', 'q1', 'q2']);
    expect(restored.queue.get('q1')?.demand).to.deep.equal(demand());
  });
});
