import { expect } from 'chai';
import { decideCall } from '../../src/core/calls/call-steps.js';
import { DuplicateRequestError, requestInUseMessage } from '../../src/core/errors.js';
import {
  place,
  type CallToPlace,
  type PlacementDecision,
  type RejectedDecision,
} from '../../src/core/placement/index.js';
import { foreignSessionMessage } from '../../src/core/placement/session-owner.js';
import { decideSessionEnd } from '../../src/core/sessions/session-end.js';
import { causeText, type NewEvent } from '../../src/events/index.js';
import { stateFromJson, stateToJson } from '../../src/projections/snapshot.js';
import {
  demand,
  finished,
  history,
  pinned,
  placed,
  registered,
  requested,
} from '../support/events.js';

/** A call of `tenantId` (null: none) with request `requestId`, in `sessionId` if given. */
function callOf(
  tenantId: string | null,
  requestId: string,
  fields: { sessionId?: string; retryOf?: string } = {},
): CallToPlace {
  return {
    requestId,
    sessionId: fields.sessionId ?? null,
    tenantId,
    retryOf: fields.retryOf ?? null,
    demand: demand(),
  };
}

/** A call's story as the router logs it: requested, placed on w1, bound to `containerId`, finished. */
function ranIn(
  tenantId: string | null,
  requestId: string,
  sessionId: string | null,
  containerId: string,
): NewEvent[] {
  return [
    requested(requestId, { tenantId, sessionId }),
    placed(requestId, 'w1', { sessionId }),
    { type: 'CallBound', requestId, containerId, checkpointId: null },
    ...(sessionId === null ? [] : [pinned(sessionId, 'w1', containerId, requestId)]),
    finished(requestId),
  ];
}

function rejection(decision: PlacementDecision): RejectedDecision {
  expect(decision.outcome, JSON.stringify(decision)).to.equal('rejected');
  return decision as RejectedDecision;
}

describe('core: sessions and request IDs belong to their first tenant', () => {
  describe('sessions', () => {
    it("given A's pinned session, when B's call names it, then NOT_FOUND in words that name no owner, and A's session is untouched", () => {
      const given = history(registered('w1'), ...ranIn('tenant-a', 'a1', 'S', 'c1'));
      expect(given.state().sessions.get('S')?.tenantId).to.equal('tenant-a');

      const decision = decideCall(given.state(), {
        call: callOf('tenant-b', 'b1', { sessionId: 'S' }),
      });
      const refused = rejection(decision.placement);
      expect(refused.code).to.equal('NOT_FOUND');
      expect(refused.message).to.equal(foreignSessionMessage('S'));
      expect(refused.message).to.not.match(/tenant-a|c1|w1|seq/);
      expect(refused.foreign).to.deep.equal({
        kind: 'session',
        id: 'S',
        ownerTenantId: 'tenant-a',
      });
      // Then: only the request and its refusal are logged; no pin is dropped.
      expect(decision.events.map((e) => e.type)).to.deep.equal(['CallRequested', 'CallRejected']);

      const after = given.add(...decision.events).state();
      expect(after.sessions.get('S')).to.deep.include({ tenantId: 'tenant-a', expired: null });
      const own = place(after, callOf('tenant-a', 'a2', { sessionId: 'S' }));
      expect(own).to.deep.include({ outcome: 'placed', workerId: 'w1', containerId: 'c1' });
    });

    it("gives the same answer for another tenant's session whatever its state: in flight, live, expired or ended", () => {
      const answers = new Map<string, RejectedDecision>();
      const inFlight = history(
        registered('w1'),
        requested('a1', { tenantId: 'tenant-a', sessionId: 'S' }),
        placed('a1', 'w1', { sessionId: 'S' }),
      );
      answers.set(
        'first call in flight',
        rejection(place(inFlight.state(), callOf('tenant-b', 'b', { sessionId: 'S' }))),
      );
      const live = history(registered('w1'), ...ranIn('tenant-a', 'a1', 'S', 'c1'));
      answers.set(
        'live',
        rejection(place(live.state(), callOf('tenant-b', 'b', { sessionId: 'S' }))),
      );
      const expired = history(registered('w1'), ...ranIn('tenant-a', 'a1', 'S', 'c1')).add({
        type: 'WorkerEvicted',
        workerId: 'w1',
        reason: 'probe',
      });
      answers.set(
        'expired',
        rejection(place(expired.state(), callOf('tenant-b', 'b', { sessionId: 'S' }))),
      );
      const ended = history(registered('w1'), ...ranIn('tenant-a', 'a1', 'S', 'c1'));
      ended.add(
        ...decideSessionEnd(ended.state(), { sessionId: 'S', tenantId: 'tenant-a' }).events,
      );
      answers.set(
        'ended',
        rejection(place(ended.state(), callOf('tenant-b', 'b', { sessionId: 'S' }))),
      );

      for (const [what, answer] of answers) {
        expect([answer.code, answer.message], what).to.deep.equal([
          'NOT_FOUND',
          foreignSessionMessage('S'),
        ]);
      }
      // The owner still hears why its own expired session cannot be used.
      const own = rejection(place(expired.state(), callOf('tenant-a', 'a2', { sessionId: 'S' })));
      expect(own.message).to.match(/^session expired: session S ended at seq \d+/);
    });

    it('keeps sessions of calls without a tenant apart from tenants’ sessions, both ways', () => {
      const given = history(
        registered('w1'),
        ...ranIn(null, 'n1', 'UNTENANTED', 'c1'),
        ...ranIn('tenant-a', 'a1', 'S', 'c2'),
      );
      const state = given.state();
      expect(
        rejection(place(state, callOf('tenant-a', 'x', { sessionId: 'UNTENANTED' }))).code,
      ).to.equal('NOT_FOUND');
      expect(rejection(place(state, callOf(null, 'y', { sessionId: 'S' }))).code).to.equal(
        'NOT_FOUND',
      );
      expect(place(state, callOf(null, 'z', { sessionId: 'UNTENANTED' }))).to.deep.include({
        outcome: 'placed',
        containerId: 'c1',
      });
    });

    it("given A's session, when B ends it, then B's answer is an unknown session's and nothing is recorded; A's end still works", () => {
      const given = history(registered('w1'), ...ranIn('tenant-a', 'a1', 'S', 'c1'));
      const foreign = decideSessionEnd(given.state(), { sessionId: 'S', tenantId: 'tenant-b' });
      const unknown = decideSessionEnd(given.state(), { sessionId: 'NEVER', tenantId: 'tenant-b' });
      const { foreign: marked, cause, ...answer } = foreign;
      const { cause: unknownCause, ...unknownAnswer } = unknown;
      expect(answer).to.deep.equal(unknownAnswer);
      expect(answer).to.deep.include({ ended: false, events: [], container: null, pin: null });
      expect([causeText(cause), causeText(unknownCause)]).to.deep.equal([
        'session:S',
        'session:NEVER',
      ]);
      expect(marked).to.deep.equal({ kind: 'session', id: 'S', ownerTenantId: 'tenant-a' });

      const own = decideSessionEnd(given.state(), { sessionId: 'S', tenantId: 'tenant-a' });
      expect(own).to.deep.include({ ended: true });
      expect(own.pin).to.deep.equal({ workerId: 'w1', containerId: 'c1' });
    });

    it('a snapshot written before sessions had owners restores their owner from the remembered calls', () => {
      const given = history(
        registered('w1'),
        ...ranIn('tenant-a', 'a1', 'S', 'c1'),
        ...ranIn(null, 'n1', 'N', 'c2'),
      );
      const json = stateToJson(given.state()) as unknown as {
        sessions: Record<string, Record<string, unknown>>;
      };
      for (const session of Object.values(json.sessions)) delete session.tenantId;
      const restored = history()
        .add({
          type: 'Snapshot',
          schemaVersion: 1,
          state: json as unknown as Record<string, unknown>,
        })
        .state();
      expect(restored.sessions.get('S')?.tenantId).to.equal('tenant-a');
      expect(restored.sessions.get('N')?.tenantId).to.equal(null);
      expect(stateFromJson(stateToJson(given.state())).sessions).to.deep.equal(
        given.state().sessions,
      );
    });
  });

  describe('request IDs', () => {
    it("given A's finished call, when B reuses its request ID, then ALREADY_EXISTS as for any ID in use, and A's record stays A's", () => {
      const given = history(registered('w1'), ...ranIn('tenant-a', 'shared', null, 'c1'));
      const decision = decideCall(given.state(), { call: callOf('tenant-b', 'shared') });
      const refused = rejection(decision.placement);
      expect([refused.code, refused.message]).to.deep.equal([
        'ALREADY_EXISTS',
        requestInUseMessage('shared'),
      ]);
      // The very words of an ID in flight: the caller cannot tell whose it is, or whether it runs.
      expect(refused.message).to.equal(new DuplicateRequestError('shared').message);
      expect(refused.foreign).to.deep.equal({
        kind: 'request',
        id: 'shared',
        ownerTenantId: 'tenant-a',
      });

      const after = given.add(...decision.events).state();
      expect(after.routing.calls.get('shared')?.tenantId).to.equal('tenant-a');
      // Then: A's own retry of it is still A's to make, and A may reuse its own ID.
      expect(place(after, callOf('tenant-a', 'a-retry', { retryOf: 'shared' })).outcome).to.equal(
        'placed',
      );
      expect(place(after, callOf('tenant-a', 'shared')).outcome).to.equal('placed');
      // A call without a tenant may not take it either; an ID no tenant used is anyone's.
      expect(rejection(place(after, callOf(null, 'shared'))).code).to.equal('ALREADY_EXISTS');
      expect(place(after, callOf('tenant-b', 'fresh')).outcome).to.equal('placed');
    });

    it('refuses the reuse of a pinned call’s ID before resolving anything', () => {
      const given = history(registered('w1'), ...ranIn('tenant-a', 'shared', null, 'c1'));
      const pinnedReuse = { ...callOf('tenant-b', 'shared'), demand: demand({ pinned: true }) };
      const refused = rejection(place(given.state(), pinnedReuse));
      expect(refused).to.deep.include({
        code: 'ALREADY_EXISTS',
        version: null,
        routingRevision: null,
      });
    });
  });
});
