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
import { atOf, demand, history, registered, started, type History } from '../support/events.js';

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
