/**
 * Admission's index (src/projections/admission-index.ts), kept by the fold event by event: after
 * every event of random histories (calls of several tenants queued, admitted, leaving, finishing,
 * sessions pinned, ended and expired, snapshots), it equals the index derived from the records,
 * and the fair order read from it equals the order a walk of the whole queue and every
 * reservation gives (the walk admission made before the index).
 */
import { expect } from 'chai';
import fc from 'fast-check';
import { fairOrder } from '../../src/core/admission/index.js';
import { decide } from '../../src/core/decisions.js';
import { validateEvent, type NewEvent } from '../../src/events/index.js';
import {
  admissionIndexOf,
  applyInPlace,
  initialState,
  snapshotOf,
  type ClusterState,
  type QueuedCall,
} from '../../src/projections/index.js';
import { atOf, container, demand, GiB, pinned, registered, started } from '../support/events.js';
import { stamped, syntheticLog } from '../support/synthetic-log.js';

/** The fair order as a walk of the queue, the reservations and the sessions computes it. */
function walkedOrder(
  state: ClusterState,
): { tenant: string; head: string; held: number; queued: number }[] {
  const heads = new Map<string, QueuedCall>();
  const counts = new Map<string, number>();
  for (const call of state.queue.values()) {
    const tenant = call.tenantId ?? '';
    if (!heads.has(tenant)) heads.set(tenant, call);
    counts.set(tenant, (counts.get(tenant) ?? 0) + 1);
  }
  const held = new Map<string, number>();
  const busy = new Set<string>();
  for (const reservation of state.reservations.values()) {
    const tenant = reservation.tenantId ?? '';
    held.set(tenant, (held.get(tenant) ?? 0) + 1);
    if (reservation.sessionId !== null) busy.add(reservation.sessionId);
  }
  for (const session of state.sessions.values()) {
    if (session.pin === null || session.expired !== null || busy.has(session.sessionId)) continue;
    const tenant = session.tenantId ?? '';
    held.set(tenant, (held.get(tenant) ?? 0) + 1);
  }
  return [...heads]
    .map(([tenant, head]) => ({
      tenant,
      head: head.requestId,
      held: held.get(tenant) ?? 0,
      queued: counts.get(tenant) ?? 0,
    }))
    .sort((a, b) => a.held - b.held || (a.tenant < b.tenant ? -1 : a.tenant > b.tenant ? 1 : 0));
}

/** A history folded in place, as the router's log does, checked after every event. */
class Checked {
  state: ClusterState = initialState();
  private seq = 0;
  private running: string[] = [];

  add(...events: readonly NewEvent[]): void {
    for (const event of events) {
      this.seq += 1;
      this.state = applyInPlace(
        this.state,
        validateEvent({ seq: this.seq, at: atOf(this.seq), cause: null, ...event }),
      );
      expect(this.state.admission, `after seq ${this.seq} (${event.type})`).to.deep.equal(
        admissionIndexOf(this.state),
      );
    }
    const order = fairOrder(this.state).map((turn) => ({
      tenant: turn.tenant,
      head: turn.head.requestId,
      held: turn.held,
      queued: turn.queued,
    }));
    expect(order, `fair order after seq ${this.seq}`).to.deep.equal(walkedOrder(this.state));
  }

  call(requestId: string, tenant: string | null, sessionId: string | null): void {
    const made = decide('call', this.state, {
      call: { requestId, sessionId, tenantId: tenant, demand: demand({ memory: GiB }) },
    });
    this.add(...made.events);
    if (made.placement.outcome === 'placed' && made.queued === null) this.placed(requestId);
  }

  admit(): void {
    const made = decide('admit', this.state, {});
    this.add(...made.events);
    if (made.requestId !== null && made.placement?.outcome === 'placed') {
      this.placed(made.requestId);
    }
  }

  /** A placed call's first answer: a session's new container is pinned to it. */
  private placed(requestId: string): void {
    this.running.push(requestId);
    const reservation = this.state.reservations.get(requestId);
    const sessionId = reservation?.sessionId ?? null;
    if (reservation === undefined || sessionId === null || reservation.containerId !== null) return;
    const containerId = `c-${requestId}`;
    this.add(
      { type: 'CallBound', requestId, containerId, checkpointId: null },
      pinned(sessionId, reservation.workerId, containerId, requestId),
    );
  }

  finish(pick: number, ok: boolean): void {
    if (this.running.length === 0) return;
    const [requestId] = this.running.splice(pick % this.running.length, 1) as [string];
    this.add(...decide('end', this.state, { requestId, code: ok ? null : 'INTERNAL' }).events);
  }

  leave(pick: number): void {
    const queued = [...this.state.queue.keys()];
    if (queued.length === 0) return;
    const requestId = queued[pick % queued.length] as string;
    this.add(
      ...decide('leaveQueue', this.state, {
        requestId,
        reason: 'cancelled',
        code: 'CANCELLED',
        message: 'the client cancelled the call',
      }).events,
    );
  }

  endSession(sessionId: string, tenantId: string | null): void {
    this.add(...decide('sessionEnd', this.state, { sessionId, tenantId }).events);
  }

  removeContainer(pick: number): void {
    const pins = [...this.state.sessions.values()].filter((s) => s.pin !== null);
    const session = pins[pick % Math.max(1, pins.length)];
    const pin = session?.pin ?? null;
    if (pin === null) return;
    this.add(container(pin.workerId, pin.containerId, 'removed'));
  }

  snapshot(): void {
    this.add({ type: 'Snapshot', state: snapshotOf(this.state) } as unknown as NewEvent);
  }
}

const TENANTS = ['a', 'b', 'c', null] as const;

const step = fc.oneof(
  fc.record({
    kind: fc.constant('call' as const),
    tenant: fc.constantFrom(...TENANTS),
    session: fc.option(fc.integer({ min: 0, max: 5 }), { nil: null }),
  }),
  fc.record({ kind: fc.constant('admit' as const) }),
  fc.record({ kind: fc.constant('finish' as const), pick: fc.nat(), ok: fc.boolean() }),
  fc.record({ kind: fc.constant('leave' as const), pick: fc.nat() }),
  fc.record({ kind: fc.constant('end' as const), session: fc.integer({ min: 0, max: 5 }) }),
  fc.record({ kind: fc.constant('remove' as const), pick: fc.nat() }),
  fc.record({ kind: fc.constant('snapshot' as const) }),
);

describe('admission index (kept by the fold)', () => {
  it('after every event equals the index derived from the records, and the fair order equals a walk of the queue and the reservations', () => {
    fc.assert(
      fc.property(fc.array(step, { minLength: 1, maxLength: 80 }), (steps) => {
        const checked = new Checked();
        checked.add(
          started({ QUEUE_TIMEOUT: 600_000 }),
          registered('w1', { maxContainers: 3 }),
          registered('w2', { maxContainers: 2 }),
        );
        let next = 0;
        for (const s of steps) {
          switch (s.kind) {
            case 'call': {
              next += 1;
              const session = s.session === null ? null : `s-${s.tenant ?? 'none'}-${s.session}`;
              checked.call(`r${next}`, s.tenant, session);
              break;
            }
            case 'admit':
              checked.admit();
              break;
            case 'finish':
              checked.finish(s.pick, s.ok);
              break;
            case 'leave':
              checked.leave(s.pick);
              break;
            case 'end':
              for (const tenant of TENANTS) {
                checked.endSession(`s-${tenant ?? 'none'}-${s.session}`, tenant);
              }
              break;
            case 'remove':
              checked.removeContainer(s.pick);
              break;
            case 'snapshot':
              checked.snapshot();
              break;
          }
        }
      }),
      { numRuns: 60 },
    );
  });

  it('equals the derived index after every event of a synthetic log (sessions, restarts, full reports)', () => {
    let state = initialState();
    for (const raw of stamped(
      syntheticLog({ seed: 28, events: 3_000, workers: 6, reports: true }),
    )) {
      const event = validateEvent(raw);
      state = applyInPlace(state, event);
      expect(state.admission, `after seq ${event.seq}`).to.deep.equal(admissionIndexOf(state));
    }
    expect(state.admission.held.size).to.be.greaterThan(0);
  });
});
