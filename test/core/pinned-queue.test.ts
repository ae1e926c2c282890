/**
 * Pinned calls in the admission queue, given / when / then (docs/tenant-routing.md, "When the
 * subset has no room"; placement rules v9): given a tenant pinned to a version whose subset has no
 * room now, when a pinned call arrives, then it waits in the queue (on its subset only) and is
 * admitted there when room frees, by the version it was queued under; one that can never fit is
 * refused at once; a cold load its deadline would not wait for is still shed at admission. Under
 * rules 6, or with `QUEUE_TIMEOUT=0`, the same call is shed with the retry-after hint, as before.
 */
import { expect } from 'chai';
import { decide } from '../../src/core/decisions.js';
import type { PlacedDecision, RejectedDecision } from '../../src/core/placement/index.js';
import type { Catalogue } from '../../src/events/index.js';
import { DEFAULT_CONFIG } from '../../src/shared/config.js';
import { finished, GiB, history, registered, started, type History } from '../support/events.js';
import {
  pinnedCall,
  residency,
  revised,
  subsetOf,
  VERSIONS_CATALOGUE,
} from '../support/routing.js';

const QUEUE = { QUEUE_TIMEOUT: 600_000 };
const WORKERS = ['w1', 'w2', 'w3', 'w4', 'w5'];
const SUBSET = subsetOf('t1', 'policy-v1', WORKERS, 2);
const OUTSIDE = WORKERS.filter((id) => !SUBSET.includes(id));
const RETRY = DEFAULT_CONFIG.ROUTING_RETRY_AFTER;

/** The versions catalogue, policy-v1 declaring a load cost of 5 s. */
const CATALOGUE: Catalogue = {
  ...VERSIONS_CATALOGUE,
  flavors: {
    ...VERSIONS_CATALOGUE.flavors,
    cpu: {
      ...(VERSIONS_CATALOGUE.flavors.cpu as NonNullable<Catalogue['flavors']['cpu']>),
      checkpoints: (VERSIONS_CATALOGUE.flavors.cpu?.checkpoints ?? []).map((checkpoint) =>
        checkpoint.id === 'policy-v1' ? { ...checkpoint, loadCost: 5_000 } : checkpoint,
      ),
    },
  },
};

/**
 * Five one-slot workers under `rulesVersion` and `config`, tenant t1 pinned to policy-v1 on two
 * of them (both holding it), and each of those two running a pinned call of t1 (`p1`, `p2`).
 */
function given(rulesVersion: number, config: Record<string, number> = QUEUE): History {
  const log = history(
    started(config, rulesVersion),
    { type: 'CatalogueLoaded', revision: 'v', catalogue: CATALOGUE },
    ...WORKERS.map((id) => registered(id, { maxContainers: 1 })),
    revised(1, 't1', 'policy-v1'),
    ...SUBSET.map((id) => residency(id, 'policy-v1', 'resident')),
  );
  for (const requestId of ['p1', 'p2']) {
    const made = decide('call', log.state(), { call: pinnedCall(requestId, 't1') });
    expect(made.placement.outcome, requestId).to.equal('placed');
    log.add(...made.events);
  }
  return log;
}

/** A pinned call of t1 decided against `log` and recorded. */
function call(log: History, requestId: string, fields: Parameters<typeof pinnedCall>[2] = {}) {
  const made = decide('call', log.state(), { call: pinnedCall(requestId, 't1', fields) });
  log.add(...made.events);
  return made;
}

/** The call `requestId` finished; admission decided and recorded. */
function finishThenAdmit(log: History, requestId: string) {
  log.add(finished(requestId));
  const admitted = decide('admit', log.state(), {});
  log.add(...admitted.events);
  return admitted;
}

const NO_ROOM =
  `no worker of version "policy-v1"'s subset (${SUBSET.join(', ')}) can take the call now ` +
  '(its filters ruled them all out)';

describe('core: pinned calls in the admission queue (rules 9)', () => {
  it('given a full subset and idle workers outside it, when a pinned call arrives, then it waits in the queue, not shed, and goes nowhere else', () => {
    const log = given(9);
    const made = call(log, 'p3');
    expect(made.queued).to.equal(NO_ROOM);
    expect(made.events.map((e) => e.type)).to.deep.equal(['CallRequested', 'CallQueued']);
    expect(made.events.at(-1)).to.deep.include({ type: 'CallQueued', why: NO_ROOM });
    expect([...log.state().queue.keys()]).to.deep.equal(['p3']);
    // The workers outside the subset had room all along, and took nothing.
    const busy = [...log.state().reservations.values()].map((r) => r.workerId);
    expect(busy.filter((id) => OUTSIDE.includes(id))).to.deep.equal([]);
    expect(decide('admit', log.state(), {}).requestId).to.equal(null);
  });

  it('when a subset member frees its slot, then the queued call is admitted there, warm, by its version', () => {
    const log = given(9);
    call(log, 'p3');
    const admitted = finishThenAdmit(log, 'p1');
    expect(admitted.requestId).to.equal('p3');
    expect(admitted.events.map((e) => e.type)).to.deep.equal(['CallAdmitted', 'CallPlaced']);
    const placed = admitted.placement as PlacedDecision;
    expect(placed.outcome).to.equal('placed');
    expect(SUBSET).to.include(placed.workerId);
    expect(placed).to.deep.include({ version: 'policy-v1', routingRevision: 1, coldLoad: false });
  });

  it('given the pin flipped while the call waited, when it is admitted, then it is still served by the version it was queued under', () => {
    const log = given(9);
    call(log, 'p3');
    log.add(revised(2, 't1', 'policy-v2', 2, 'policy-v1'));
    const admitted = finishThenAdmit(log, 'p1');
    expect(admitted.requestId).to.equal('p3');
    expect(admitted.placement).to.deep.include({
      outcome: 'placed',
      version: 'policy-v1',
      routingRevision: 1,
    });
    // A call arriving after the flip resolves the table in force.
    expect(call(log, 'p4').placement).to.deep.include({ version: 'policy-v2', routingRevision: 2 });
  });

  it('given a pinned call no subset member could take even empty, then it is refused at once as never fitting, not queued', () => {
    const log = given(9);
    const made = call(log, 'huge', { demand: { memory: 100 * GiB } });
    expect(made.queued).to.equal(null);
    const refusal = made.placement as RejectedDecision;
    expect(refusal).to.deep.include({
      outcome: 'rejected',
      code: 'RESOURCE_EXHAUSTED',
      fit: 'never',
      retryAfterMs: null,
      version: 'policy-v1',
    });
    expect(refusal.message).to.match(
      /^no worker can ever accept this request: the largest worker offers/,
    );
    expect(log.state().queue.size).to.equal(0);
  });

  it("given a queued call whose caller's deadline is shorter than its version's cold load, when it is admitted to a worker that must load it, then it is shed with the hint (rules 6 still apply)", () => {
    // Two workers, both in t1's subset, neither holding the version, both busy with unpinned calls.
    const log = history(
      started(QUEUE, 9),
      { type: 'CatalogueLoaded', revision: 'v', catalogue: CATALOGUE },
      registered('w1', { maxContainers: 1 }),
      registered('w2', { maxContainers: 1 }),
      revised(1, 't1', 'policy-v1'),
    );
    for (const requestId of ['u1', 'u2']) {
      const unpinned = pinnedCall(requestId, 't2', { demand: { pinned: false } });
      log.add(...decide('call', log.state(), { call: unpinned }).events);
      expect(log.state().reservations.has(requestId), requestId).to.equal(true);
    }
    expect(call(log, 'short', { deadlineMs: 2_000 }).queued).to.contain('can take the call now');
    expect(call(log, 'long', { deadlineMs: 60_000 }).queued).to.contain('can take the call now');
    const first = finishThenAdmit(log, 'u1');
    expect(first.requestId).to.equal('short');
    expect(first.events.map((e) => e.type)).to.deep.equal(['CallAdmitted', 'CallRejected']);
    expect(first.placement).to.deep.include({ code: 'RESOURCE_EXHAUSTED', retryAfterMs: RETRY });
    expect((first.placement as RejectedDecision).message).to.contain(
      "but the caller's deadline leaves only 2s",
    );
    // The slot it did not take goes to the next call, whose deadline waits for the load.
    const second = decide('admit', log.state(), {});
    expect(second.requestId).to.equal('long');
    expect(second.placement).to.deep.include({ outcome: 'placed', coldLoad: true });
  });

  it('given rules 6 (a log recorded before), then the same call is shed with the retry-after hint, as it was', () => {
    const log = given(6);
    const made = call(log, 'p3');
    expect(made.queued).to.equal(null);
    expect(made.events.at(-1)).to.deep.include({
      type: 'CallRejected',
      code: 'RESOURCE_EXHAUSTED',
      message: `${NO_ROOM}: retry in 2s (ROUTING_RETRY_AFTER)`,
      retryAfterMs: RETRY,
    });
    // And one that can never fit is shed too, as it was under 6.
    const huge = call(log, 'huge', { demand: { memory: 100 * GiB } });
    expect(huge.placement).to.deep.include({ retryAfterMs: RETRY });
    expect(huge.placement).to.not.have.property('fit');
  });

  it('given rules 9 with QUEUE_TIMEOUT=0, then the call is shed exactly as under rules 6', () => {
    const off = call(given(9, { QUEUE_TIMEOUT: 0 }), 'p3');
    const before = call(given(6, { QUEUE_TIMEOUT: 0 }), 'p3');
    expect(off.queued).to.equal(null);
    expect(off.events).to.deep.equal(before.events);
  });
});
