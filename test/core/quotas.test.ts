/**
 * Tenants' quotas, given / when / then (docs/quotas.md): given a cluster's log, when an operator
 * sets or removes a quota, then the core's decision is `QuotaChanged` or `QuotaRemoved` (or a
 * refusal with its code, naming the field), the fold keeps the table with its revision, and
 * admission reads it: weights in the fair order, slot caps, queue caps.
 */
import { expect } from 'chai';
import { decide } from '../../src/core/decisions.js';
import { QuotaChangeRefusedError, type QuotaSetInput } from '../../src/core/quotas/index.js';
import type { Demand, NewEvent } from '../../src/events/index.js';
import { validateEvent } from '../../src/events/index.js';
import { evolve, quotaOf, type ClusterState } from '../../src/projections/index.js';
import { snapshotOf } from '../../src/projections/snapshot.js';
import { queueViews } from '../../src/router/admin/queue-view.js';
import {
  atOf,
  demand,
  finished,
  history,
  registered,
  started,
  type History,
} from '../support/events.js';

const QUEUE = { QUEUE_TIMEOUT: 600_000 };

function record(given: History, events: readonly NewEvent[]): ClusterState {
  given.add(...events);
  return given.state();
}

function call(
  given: History,
  requestId: string,
  tenantId: string | null,
  fields: Partial<Demand> = {},
  sessionId: string | null = null,
) {
  const made = decide('call', given.state(), {
    call: { requestId, sessionId, tenantId, demand: demand(fields) },
  });
  record(given, made.events);
  return made;
}

function setQuota(given: History, fields: Partial<QuotaSetInput> & { tenantId: string }) {
  const made = decide('quotaSet', given.state(), {
    weight: null,
    maxSlots: null,
    maxQueued: null,
    expectRevision: null,
    ...fields,
  });
  record(given, made.events);
  return made;
}

function refusal(act: () => unknown): QuotaChangeRefusedError {
  try {
    act();
  } catch (error) {
    if (error instanceof QuotaChangeRefusedError) return error;
    throw error;
  }
  throw new Error('expected a refusal');
}

function cluster(slots: number, config: Record<string, number> = QUEUE): History {
  return history(started(config), registered('w1', { maxContainers: slots }));
}

describe('quotas: the table', () => {
  it('given no quota events, every tenant has the defaults (weight 1, no cap, 2,000 queued) at revision 0', () => {
    const state = cluster(4).state();
    expect(state.quotas.revision).to.equal(0);
    expect(quotaOf(state.quotas, 'a')).to.deep.equal({
      weight: 1,
      maxSlots: null,
      maxQueued: 2_000,
    });
  });

  it('when a quota is set, QuotaChanged records the whole quota with the next revision, caused by admin:TENANT', () => {
    const given = cluster(4);
    const made = setQuota(given, { tenantId: 'a', maxSlots: 12 });
    expect(made.cause).to.deep.equal({ kind: 'admin', tenantId: 'a' });
    expect(made.events).to.deep.equal([
      {
        type: 'QuotaChanged',
        revision: 1,
        tenantId: 'a',
        weight: 1,
        maxSlots: 12,
        maxQueued: 2_000,
      },
    ]);
    // A second set changes only what it names; the revision is the table's, global.
    const second = setQuota(given, { tenantId: 'b', weight: 2 });
    expect(second.change.revision).to.equal(2);
    const third = setQuota(given, { tenantId: 'a', weight: 0.5, expectRevision: 2 });
    expect(third.events[0]).to.deep.include({ revision: 3, weight: 0.5, maxSlots: 12 });
    const state = given.state();
    expect(state.quotas.revision).to.equal(3);
    expect(quotaOf(state.quotas, 'a')).to.deep.include({
      weight: 0.5,
      maxSlots: 12,
      maxQueued: 2_000,
    });
    expect(quotaOf(state.quotas, 'b')).to.deep.include({
      weight: 2,
      maxSlots: null,
      maxQueued: 2_000,
    });
    // `none` lifts the cap.
    setQuota(given, { tenantId: 'a', maxSlots: 'none' });
    expect(quotaOf(given.state().quotas, 'a').maxSlots).to.equal(null);
  });

  it('when the quota is already what is asked, nothing is appended and the revision stays', () => {
    const given = cluster(4);
    setQuota(given, { tenantId: 'a', weight: 3 });
    const again = setQuota(given, { tenantId: 'a', weight: 3 });
    expect(again.events).to.deep.equal([]);
    expect(again.change.revision).to.equal(1);
    expect(again.change.notes).to.deep.equal(['the quota is already this: nothing changed']);
  });

  it('negative, zero or non-numeric weights and caps are INVALID_ARGUMENT naming the field; nothing is appended', () => {
    const given = cluster(4);
    const cases: [Partial<QuotaSetInput>, string][] = [
      [{ weight: -1 }, 'weight must be a number above 0'],
      [{ weight: 0 }, 'weight must be a number above 0'],
      [{ weight: Number.NaN }, 'weight must be a number above 0 and at most 1000000 (got NaN)'],
      [{ weight: Number.POSITIVE_INFINITY }, 'weight must be'],
      [{ maxSlots: 0 }, 'maxSlots must be a whole number, at least 1'],
      [{ maxSlots: -3 }, 'maxSlots must be a whole number'],
      [{ maxSlots: 2.5 }, 'maxSlots must be a whole number'],
      [{ maxSlots: Number.NaN }, 'maxSlots must be a whole number'],
      [{ maxQueued: 0 }, 'maxQueued must be a whole number, at least 1'],
      [{ maxQueued: -1 }, 'maxQueued must be a whole number'],
      [{}, 'names at least one of weight, maxSlots, maxQueued'],
    ];
    for (const [fields, words] of cases) {
      const refused = refusal(() => setQuota(given, { tenantId: 'a', ...fields }));
      expect(refused.code, JSON.stringify(fields)).to.equal('INVALID_ARGUMENT');
      expect(refused.message).to.contain(words);
    }
    expect(refusal(() => setQuota(given, { tenantId: '', weight: 1 })).code).to.equal(
      'INVALID_ARGUMENT',
    );
    expect(given.state().quotas.revision).to.equal(0);
  });

  it('a stale expected revision is FAILED_PRECONDITION, for a set and a removal', () => {
    const given = cluster(4);
    setQuota(given, { tenantId: 'a', weight: 2 });
    const stale = refusal(() => setQuota(given, { tenantId: 'a', weight: 3, expectRevision: 0 }));
    expect(stale.code).to.equal('FAILED_PRECONDITION');
    expect(stale.message).to.equal(
      'the quota table is at revision 1, not 0: someone changed it since; look again with readie quota status',
    );
    const removal = refusal(() =>
      decide('quotaRemove', given.state(), { tenantId: 'a', expectRevision: 5 }),
    );
    expect(removal.code).to.equal('FAILED_PRECONDITION');
  });

  it('when a quota is removed, QuotaRemoved puts the tenant back on the defaults; removing none is NOT_FOUND', () => {
    const given = cluster(4);
    setQuota(given, { tenantId: 'a', maxSlots: 2, weight: 4 });
    const made = decide('quotaRemove', given.state(), { tenantId: 'a', expectRevision: 1 });
    expect(made.events).to.deep.equal([{ type: 'QuotaRemoved', revision: 2, tenantId: 'a' }]);
    const state = record(given, made.events);
    expect(state.quotas.entries.has('a')).to.equal(false);
    expect(quotaOf(state.quotas, 'a')).to.deep.equal({
      weight: 1,
      maxSlots: null,
      maxQueued: 2_000,
    });
    const none = refusal(() =>
      decide('quotaRemove', state, { tenantId: 'a', expectRevision: null }),
    );
    expect(none.code).to.equal('NOT_FOUND');
  });

  it('a cap below what the tenant holds says so: nothing it holds is taken from it', () => {
    const given = cluster(4);
    call(given, 'a1', 'a');
    call(given, 'a2', 'a');
    const made = setQuota(given, { tenantId: 'a', maxSlots: 2 });
    expect(made.change.notes.join('\n')).to.contain('tenant a holds 2 slots now, maxSlots 2');
  });

  it('the table survives a snapshot, with its revision', () => {
    const given = cluster(4);
    setQuota(given, { tenantId: 'a', weight: 2, maxSlots: 3 });
    setQuota(given, { tenantId: 'b', maxQueued: 7 });
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
    expect(restored.quotas.revision).to.equal(2);
    expect([...restored.quotas.entries]).to.deep.equal([...state.quotas.entries]);
  });
});

function finish(given: History, requestId: string): void {
  given.add(finished(requestId));
}

/** Frees `requestId`'s slot and records the next admission; the call admitted (or `none`). */
function freeAndAdmit(given: History, requestId: string): string {
  finish(given, requestId);
  const admitted = decide('admit', given.state(), {});
  record(given, admitted.events);
  return admitted.requestId ?? 'none';
}

describe('quotas: admission', () => {
  it('given weights 2:1, when slots free, then the tenant with the lowest held / weight goes first (ties by tenant ID)', () => {
    const given = cluster(6);
    setQuota(given, { tenantId: 'b', weight: 2 });
    // a holds 2, b holds 4; both have calls waiting.
    for (const id of ['a1', 'a2']) call(given, id, 'a');
    for (const id of ['b1', 'b2', 'b3', 'b4']) call(given, id, 'b');
    for (const id of ['aq1', 'aq2', 'aq3']) call(given, id, 'a');
    for (const id of ['bq1', 'bq2', 'bq3']) call(given, id, 'b');
    // Each turnover: shares a 2/1 vs b 3/2 -> b; a 2 vs b 4/2 = 2: tie, a by ID; ...
    const order = ['b1', 'a1', 'b2', 'b3', 'a2', 'b4'].map((id) => freeAndAdmit(given, id));
    expect(order).to.deep.equal(['bq1', 'aq1', 'bq2', 'bq3', 'aq2', 'aq3']);
    // Unweighted (no quota events), the same log admits by slots held alone.
    const plain = cluster(6);
    for (const id of ['a1', 'a2']) call(plain, id, 'a');
    for (const id of ['b1', 'b2', 'b3', 'b4']) call(plain, id, 'b');
    call(plain, 'aq1', 'a');
    call(plain, 'bq1', 'b');
    expect(freeAndAdmit(plain, 'b1')).to.equal('aq1');
  });

  it('given maxSlots, when its tenant holds that many, then its next call waits although the cluster has room, and others run at once', () => {
    const given = cluster(16);
    setQuota(given, { tenantId: 'a', maxSlots: 12 });
    for (let i = 0; i < 12; i += 1) call(given, `a${i}`, 'a');
    const capped = call(given, 'a-over', 'a');
    expect(capped.queued).to.equal("tenant a holds 12 slots, its quota's maxSlots 12");
    expect(capped.events.at(-1)).to.deep.include({ type: 'CallQueued' });
    expect(call(given, 'b1', 'b').placement.outcome).to.equal('placed');
    // Room is left, but admission passes a over while it holds its cap.
    expect(decide('admit', given.state(), {}).requestId).to.equal(null);
    expect(freeAndAdmit(given, 'a0')).to.equal('a-over');
  });

  it("given maxSlots, sessions' idle containers count: a tenant whose sessions hold its cap waits, and a session call reusing its container does not", () => {
    const given = cluster(4);
    setQuota(given, { tenantId: 'a', maxSlots: 2 });
    for (const id of ['s1', 's2']) {
      const made = call(given, `${id}-c1`, 'a', {}, id);
      expect(made.placement.outcome).to.equal('placed');
      given.add(
        { type: 'CallBound', requestId: `${id}-c1`, containerId: `k-${id}`, checkpointId: null },
        {
          type: 'SessionPinned',
          sessionId: id,
          workerId: 'w1',
          containerId: `k-${id}`,
          requestId: `${id}-c1`,
          checkpointId: null,
        },
        {
          type: 'ContainerStateChanged',
          workerId: 'w1',
          containerId: `k-${id}`,
          state: 'busy',
          checkpointId: null,
          reportSeq: null,
        },
      );
      finish(given, `${id}-c1`);
    }
    expect(given.state().admission.held.get('a')).to.equal(2);
    expect(call(given, 'plain', 'a').queued).to.contain('holds 2 slots');
    const again = call(given, 's1-c2', 'a', {}, 's1');
    expect(again.queued).to.equal(null);
    expect(again.placement).to.deep.include({ outcome: 'placed', containerId: 'k-s1' });
  });

  it('given no queue (QUEUE_TIMEOUT=0), a call beyond maxSlots is refused at once, RESOURCE_EXHAUSTED', () => {
    const given = cluster(4, { QUEUE_TIMEOUT: 0 });
    setQuota(given, { tenantId: 'a', maxSlots: 1 });
    call(given, 'a1', 'a');
    const refused = call(given, 'a2', 'a');
    expect(refused.events.at(-1)).to.deep.include({
      type: 'CallRejected',
      code: 'RESOURCE_EXHAUSTED',
      message: "tenant a holds 1 slot, its quota's maxSlots 1",
    });
  });

  it('given maxQueued, when that many of its calls wait, then one more is refused at once with a retry-after; other tenants still queue', () => {
    const given = cluster(1);
    setQuota(given, { tenantId: 't', maxQueued: 2 });
    call(given, 'x', 'x');
    expect(call(given, 't1', 't').queued).to.not.equal(null);
    expect(call(given, 't2', 't').queued).to.not.equal(null);
    const full = call(given, 't3', 't');
    expect(full.events.at(-1)).to.deep.include({
      type: 'CallRejected',
      code: 'RESOURCE_EXHAUSTED',
      retryAfterMs: 2_000,
      message:
        'the admission queue holds 2 calls of tenant t, the most it keeps (maxQueued 2): retry in 2000ms',
    });
    expect(call(given, 'u1', 'u').queued).to.not.equal(null);
  });

  it('when a cap is raised, admission lets the waiting call in (the change is a capacity change)', () => {
    const given = cluster(4);
    setQuota(given, { tenantId: 'a', maxSlots: 1 });
    call(given, 'a1', 'a');
    call(given, 'a2', 'a');
    expect(decide('admit', given.state(), {}).requestId).to.equal(null);
    setQuota(given, { tenantId: 'a', maxSlots: 2 });
    expect(decide('admit', given.state(), {}).requestId).to.equal('a2');
  });

  it('given quotas, the status view shows each tenant its weight, caps and a fair share by weight', () => {
    const given = cluster(12);
    setQuota(given, { tenantId: 'a', weight: 2, maxSlots: 10, maxQueued: 50 });
    call(given, 'a1', 'a');
    call(given, 'b1', 'b');
    const rows = queueViews(given.state());
    expect(
      rows.map((row) => [row.tenantId, row.weight, row.maxSlots, row.maxQueued]),
    ).to.deep.equal([
      ['a', 2, 10, 50],
      ['b', 1, undefined, 2_000],
    ]);
    expect(rows.map((row) => row.fairShare)).to.deep.equal([8, 4]);
  });
});
