/**
 * Given / when / then tests of the pin changes (stage, flip, rollback, set-k, remove), what the
 * router tells workers to keep, residency reports, and the routing part of the fold.
 */
import { expect } from 'chai';
import {
  decideFlip,
  decideProtection,
  decideRemove,
  decideResidencyReport,
  decideRollback,
  decideSetK,
  decideStage,
  PinChangeRefusedError,
} from '../../src/core/pins/index.js';
import { rendezvousSubset } from '../../src/core/placement/index.js';
import type { NewEvent } from '../../src/events/index.js';
import {
  fold,
  restoreSnapshot,
  snapshotOf,
  type ClusterState,
} from '../../src/projections/index.js';
import { DEFAULT_CONFIG } from '../../src/shared/config.js';
import {
  atOf,
  demand,
  GiB,
  history,
  placed,
  registered,
  requested,
  type History,
} from '../support/events.js';
import { residency, revised, routerWithVersions } from '../support/routing.js';

const WORKERS = ['w1', 'w2', 'w3', 'w4'];
const budget = (workerId: string, residentMemory: number | null = 8 * GiB): NewEvent => ({
  type: 'ResidencyBudget',
  workerId,
  residentMemory,
});

function fleet(): History {
  return history(
    ...routerWithVersions(),
    ...WORKERS.map((id) => registered(id)),
    ...WORKERS.map((id) => budget(id)),
  );
}

/** Now, in epoch ms, at the seq after the history's last event. */
const nowAfter = (given: History) => Date.parse(atOf(given.lastSeq + 1));

/** Asks to flip t1's staged version, not forced, at the next event's time. */
const unforcedFlip = (given: History) => () =>
  decideFlip(given.state(), {
    tenantId: 't1',
    expectRevision: null,
    force: false,
    now: nowAfter(given),
  });

function refused(run: () => unknown, code: string, words: RegExp): void {
  let error: unknown;
  try {
    run();
  } catch (caught) {
    error = caught;
  }
  expect(error, 'refused').to.be.instanceOf(PinChangeRefusedError);
  expect((error as PinChangeRefusedError).code).to.equal(code);
  expect((error as Error).message).to.match(words);
}

const stage = (given: History, fields: Partial<Parameters<typeof decideStage>[1]> = {}) =>
  decideStage(given.state(), {
    tenantId: 't1',
    version: 'policy-v1',
    k: 2,
    force: false,
    now: nowAfter(given),
    ...fields,
  });

describe('pin changes', () => {
  describe('stage', () => {
    it('appends PinStaged with the subset the pin will hash to, caused by admin:TENANT', () => {
      const decision = stage(fleet());
      expect(decision.cause).to.deep.equal({ kind: 'admin', tenantId: 't1' });
      expect(decision.events).to.deep.equal([
        {
          type: 'PinStaged',
          tenantId: 't1',
          version: 'policy-v1',
          k: 2,
          targetWorkers: rendezvousSubset('t1', 'policy-v1', WORKERS, 2).sort(),
        },
      ]);
      expect(decision.change.notes.join(' ')).to.match(
        /fits: resident memory: the table needs 4GiB/,
      );
    });

    it('refuses an unknown version, an alias, k < 1, a bad tenant, each with its own message', () => {
      const given = fleet();
      refused(
        () => stage(given, { version: 'policy-v9' }),
        'NOT_FOUND',
        /not in the catalogue in force \(revision v; known: checkpoint_0, policy-gpu, policy-v1, policy-v2\)/,
      );
      refused(
        () => stage(given, { version: 'latest' }),
        'INVALID_ARGUMENT',
        /"latest" is an alias, not a version/,
      );
      refused(
        () => stage(given, { k: 0 }),
        'INVALID_ARGUMENT',
        /k must be a whole number of workers, at least 1/,
      );
      refused(() => stage(given, { tenantId: '' }), 'INVALID_ARGUMENT', /needs a tenant/);
      refused(() => stage(given, { tenantId: 'a\nb' }), 'INVALID_ARGUMENT', /control characters/);
    });

    it('refuses a table that does not fit the fleet unless forced', () => {
      const small = history(
        ...routerWithVersions(),
        ...WORKERS.map((id) => registered(id)),
        ...WORKERS.map((id) => budget(id, GiB)),
      );
      refused(
        () => stage(small),
        'RESOURCE_EXHAUSTED',
        /would not fit the fleet: .*needs 4GiB.*offer 4GiB.*over their own budget/,
      );
      const forced = stage(small, { force: true });
      expect(forced.events).to.have.length(1);
      expect(forced.change.notes.join(' ')).to.match(/does not fit \(forced\)/);
    });
  });

  describe('flip', () => {
    it('is refused while the staged version is not resident on its whole subset, then allowed', () => {
      const given = fleet();
      given.add(...stage(given).events);
      const [a, b] = rendezvousSubset('t1', 'policy-v1', WORKERS, 2) as [string, string];
      given.add(residency(a, 'policy-v1', 'resident'), residency(b, 'policy-v1', 'loading'));
      const flip = unforcedFlip(given);
      refused(
        flip,
        'FAILED_PRECONDITION',
        new RegExp(`not resident on its whole subset: ${b} \\(loading\\)`),
      );
      given.add(residency(b, 'policy-v1', 'resident'));
      const decision = flip();
      expect(decision.events).to.deep.equal([
        {
          type: 'RoutingRevised',
          revision: 1,
          tenantId: 't1',
          version: 'policy-v1',
          k: 2,
          previousVersion: null,
        },
      ]);
      given.add(...decision.events);
      expect(given.state().routing.staged.size).to.equal(0);
      expect(given.state().routing.entries.get('t1')).to.deep.include({
        version: 'policy-v1',
        revision: 1,
      });
    });

    it('is allowed while a subset member reports its status again, refused after another process registers', () => {
      const given = history(
        ...routerWithVersions(),
        ...WORKERS.map((id) => registered(id, { instanceId: `${id}-1` })),
        ...WORKERS.map((id) => budget(id)),
      );
      given.add(...stage(given).events);
      const [a, b] = rendezvousSubset('t1', 'policy-v1', WORKERS, 2) as [string, string];
      given.add(residency(a, 'policy-v1', 'resident'), residency(b, 'policy-v1', 'resident'));
      const flip = unforcedFlip(given);
      // The worker reports its status again after a load (its checkpoints changed): the same
      // process still holds policy-v1, before and after its full residency report lands.
      given.add(registered(b, { instanceId: `${b}-1` }));
      expect(flip().events).to.have.length(1);
      expect(given.state().routing.workers.get(b)?.versions.get('policy-v1')?.state).to.equal(
        'resident',
      );
      // A new process of it holds nothing it has not reported.
      given.add(registered(b, { instanceId: `${b}-2` }));
      refused(
        flip,
        'FAILED_PRECONDITION',
        new RegExp(`not resident on its whole subset: ${b} \\(nothing reported\\)`),
      );
    });

    it('is refused when the expected revision is stale, or with nothing staged, or for an unknown tenant', () => {
      const given = fleet().add(revised(1, 't1', 'policy-v1'), {
        type: 'PinStaged',
        tenantId: 't1',
        version: 'policy-v2',
        k: 2,
        targetWorkers: [],
      });
      refused(
        () => decideFlip(given.state(), { tenantId: 't1', expectRevision: 0, force: true, now: 0 }),
        'FAILED_PRECONDITION',
        /at revision 1, not 0/,
      );
      refused(
        () =>
          decideFlip(given.state(), {
            tenantId: 'nobody',
            expectRevision: null,
            force: true,
            now: 0,
          }),
        'NOT_FOUND',
        /tenant nobody has no pinned version and nothing staged/,
      );
      const unstaged = fleet().add(revised(1, 't1', 'policy-v1'));
      refused(
        () =>
          decideFlip(unstaged.state(), {
            tenantId: 't1',
            expectRevision: null,
            force: true,
            now: 0,
          }),
        'FAILED_PRECONDITION',
        /nothing staged/,
      );
    });

    it('forced, flips at once and says what it skipped; the old version is retained', () => {
      const given = fleet().add(revised(1, 't1', 'policy-v1'), {
        type: 'PinStaged',
        tenantId: 't1',
        version: 'policy-v2',
        k: 2,
        targetWorkers: [],
      });
      const decision = decideFlip(given.state(), {
        tenantId: 't1',
        expectRevision: 1,
        force: true,
        now: nowAfter(given),
      });
      expect(decision.events[0]).to.deep.include({
        revision: 2,
        version: 'policy-v2',
        previousVersion: 'policy-v1',
      });
      expect(decision.change.notes.join(' ')).to.match(/forced/);
      given.add(...decision.events);
      expect([...given.state().routing.retained.values()]).to.deep.equal([
        { tenantId: 't1', version: 'policy-v1', k: 2, since: atOf(given.lastSeq) },
      ]);
    });
  });

  describe('rollback, set-k, remove', () => {
    it('rolls back to the version the current one replaced, and says whether it is still kept', () => {
      const given = fleet().add(
        revised(1, 't1', 'policy-v1'),
        revised(2, 't1', 'policy-v2', 2, 'policy-v1'),
      );
      const decision = decideRollback(given.state(), {
        tenantId: 't1',
        expectRevision: 2,
        now: nowAfter(given),
      });
      expect(decision.events[0]).to.deep.include({
        revision: 3,
        version: 'policy-v1',
        previousVersion: 'policy-v2',
      });
      const late = decideRollback(given.state(), {
        tenantId: 't1',
        expectRevision: null,
        now: nowAfter(given) + DEFAULT_CONFIG.PIN_RETENTION,
      });
      expect(late.change.notes.join(' ')).to.match(/past PIN_RETENTION/);
      const first = fleet().add(revised(1, 't1', 'policy-v1'));
      refused(
        () => decideRollback(first.state(), { tenantId: 't1', expectRevision: null, now: 0 }),
        'FAILED_PRECONDITION',
        /nothing to roll back to/,
      );
    });

    it('set-k keeps the version and what a rollback returns to; the same k appends nothing', () => {
      const given = fleet().add(
        revised(1, 't1', 'policy-v1'),
        revised(2, 't1', 'policy-v2', 2, 'policy-v1'),
      );
      const decision = decideSetK(given.state(), {
        tenantId: 't1',
        k: 3,
        expectRevision: null,
        force: false,
        now: nowAfter(given),
      });
      expect(decision.events[0]).to.deep.include({
        revision: 3,
        version: 'policy-v2',
        k: 3,
        previousVersion: 'policy-v1',
      });
      expect(decision.change.notes.join('\n')).to.not.include('can hold');
      // More than the fleet: kept on every worker that can hold it, and the answer says so.
      const beyond = decideSetK(given.state(), {
        tenantId: 't1',
        k: 6,
        expectRevision: null,
        force: true,
        now: nowAfter(given),
      });
      expect(beyond.events[0]).to.deep.include({ k: 6 });
      expect(beyond.change.workers).to.deep.equal(WORKERS);
      expect(beyond.change.notes).to.include(
        'k is 6, but only 4 workers can hold "policy-v2" now: it is kept on w1, w2, w3, w4; a worker that joins later joins its subset',
      );
      expect(
        decideSetK(given.state(), {
          tenantId: 't1',
          k: 2,
          expectRevision: null,
          force: false,
          now: 0,
        }).events,
      ).to.deep.equal([]);
      refused(
        () =>
          decideSetK(given.state(), {
            tenantId: 't1',
            k: 0,
            expectRevision: null,
            force: false,
            now: 0,
          }),
        'INVALID_ARGUMENT',
        /at least 1/,
      );
    });

    it('removes a pin (version and k null), and refuses a tenant with nothing to remove', () => {
      const given = fleet().add(revised(1, 't1', 'policy-v1'));
      const decision = decideRemove(given.state(), { tenantId: 't1', expectRevision: 1, now: 0 });
      expect(decision.events).to.deep.equal([
        {
          type: 'RoutingRevised',
          revision: 2,
          tenantId: 't1',
          version: null,
          k: null,
          previousVersion: 'policy-v1',
        },
      ]);
      given.add(...decision.events);
      expect(given.state().routing.entries.has('t1')).to.equal(false);
      refused(
        () => decideRemove(given.state(), { tenantId: 't1', expectRevision: null, now: 0 }),
        'NOT_FOUND',
        /nothing to remove/,
      );
    });
  });

  describe('what workers are told to keep', () => {
    it('protects the pinned version on its subset, the staged one on its targets, the retained one until PIN_RETENTION', () => {
      const given = fleet().add(revised(1, 't1', 'policy-v1', 1));
      const [p1] = rendezvousSubset('t1', 'policy-v1', WORKERS, 1) as [string];
      const decision = decideProtection(given.state(), { now: nowAfter(given) });
      expect(decision.cause).to.deep.equal({ kind: 'routing' });
      expect(decision.events).to.deep.equal([
        { type: 'ResidencyProtected', workerId: p1, checkpointIds: ['policy-v1'] },
      ]);
      given.add(...decision.events);
      expect(decideProtection(given.state(), { now: nowAfter(given) }).events).to.deep.equal([]);

      given.add(revised(2, 't1', 'policy-v2', 1, 'policy-v1'));
      const flippedAt = Date.parse(atOf(given.lastSeq));
      const [p2] = rendezvousSubset('t1', 'policy-v2', WORKERS, 1) as [string];
      given.add(...decideProtection(given.state(), { now: flippedAt + 1000 }).events);
      const told = (workerId: string) => given.state().routing.workers.get(workerId)?.protectedIds;
      expect(told(p1)).to.include('policy-v1');
      expect(told(p2)).to.include('policy-v2');
      const expired = decideProtection(given.state(), {
        now: flippedAt + DEFAULT_CONFIG.PIN_RETENTION + 1,
      });
      if (p1 !== p2)
        expect(expired.events).to.deep.include({
          type: 'ResidencyProtected',
          workerId: p1,
          checkpointIds: [],
        });
      else
        expect(expired.events).to.deep.equal([
          { type: 'ResidencyProtected', workerId: p1, checkpointIds: ['policy-v2'] },
        ]);
    });

    it('moves protection when a subset member leaves, and tells a worker again after it registers', () => {
      const given = fleet().add(revised(1, 't1', 'policy-v1', 1));
      const [p1] = rendezvousSubset('t1', 'policy-v1', WORKERS, 1) as [string];
      given.add(...decideProtection(given.state(), { now: 0 }).events);
      given.add({ type: 'WorkerLeaving', workerId: p1 });
      const [next] = rendezvousSubset(
        't1',
        'policy-v1',
        WORKERS.filter((id) => id !== p1),
        1,
      ) as [string];
      const moved = decideProtection(given.state(), { now: 0 }).events;
      expect(moved).to.deep.include({
        type: 'ResidencyProtected',
        workerId: next,
        checkpointIds: ['policy-v1'],
      });
      expect(moved).to.deep.include({
        type: 'ResidencyProtected',
        workerId: p1,
        checkpointIds: [],
      });
      given.add(...moved, registered(p1));
      expect(given.state().routing.workers.get(p1)?.protectedIds).to.equal(null);
      expect(decideProtection(given.state(), { now: 0 }).events).to.deep.include({
        type: 'ResidencyProtected',
        workerId: p1,
        checkpointIds: ['policy-v1'],
      });
    });
  });

  describe('residency reports', () => {
    it('record the budget and each changed version; a repeat records nothing; unknown workers nothing', () => {
      const given = history(...routerWithVersions(), registered('w1'));
      const report = {
        workerId: 'w1',
        residentMemory: 4 * GiB,
        versions: [{ checkpointId: 'policy-v1', state: 'resident' as const, error: null }],
      };
      const decision = decideResidencyReport(given.state(), report);
      expect(decision.cause).to.deep.equal({ kind: 'report', workerId: 'w1' });
      expect(decision.events).to.deep.equal([
        { type: 'ResidencyBudget', workerId: 'w1', residentMemory: 4 * GiB },
        {
          type: 'ResidencyChanged',
          workerId: 'w1',
          checkpointId: 'policy-v1',
          state: 'resident',
          error: null,
        },
      ]);
      given.add(...decision.events);
      expect(decideResidencyReport(given.state(), report).events).to.deep.equal([]);
      expect(
        decideResidencyReport(given.state(), { ...report, workerId: 'ghost' }),
      ).to.deep.include({ registered: false, events: [] });
      // Names the catalogue in force does not list are not recorded.
      const unlisted = {
        ...report,
        versions: [{ checkpointId: 'made-up', state: 'resident' as const, error: null }],
      };
      expect(decideResidencyReport(given.state(), unlisted).events).to.deep.equal([]);
    });
  });

  describe('the routing fold', () => {
    it("keeps tenants' calls for PIN_RETENTION (longer while they run), and survives a snapshot", () => {
      const given = history(
        ...routerWithVersions({ PIN_RETENTION: 10_000 }),
        registered('w1'),
        revised(1, 't1', 'policy-v1', 1),
      );
      given.add(
        requested('old', { tenantId: 't1', demand: demand({ pinned: true }) }),
        requested('running', { tenantId: 't1', demand: demand({ pinned: true }) }),
        placed('running', 'w1', {
          checkpointId: 'policy-v1',
          version: 'policy-v1',
          routingRevision: 1,
          coldLoad: true,
        }),
      );
      for (let i = 0; i < 12; i += 1) given.add(registered('w1'));
      given.add(requested('late', { tenantId: 't1', demand: demand({ pinned: true }) }));
      const state: ClusterState = given.state();
      expect([...state.routing.calls.keys()]).to.deep.equal(['running', 'late']);
      expect(state.routing.calls.get('running')?.revision).to.equal(1);
      const restored = restoreSnapshot({
        seq: state.lastSeq,
        at: atOf(state.lastSeq),
        cause: null,
        type: 'Snapshot',
        schemaVersion: 1,
        state: snapshotOf(state),
      });
      expect(restored.routing).to.deep.equal(state.routing);
      expect(fold(given.events).routing).to.deep.equal(state.routing);
    });
  });
});
