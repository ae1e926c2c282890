/** The container pool's rules (pure): slots, standbys, idle expiry, and who owns a container. */
import { expect } from 'chai';
import {
  admitCall,
  checkResumable,
  expiresIdle,
  idleExpiresIn,
  keepsStandbys,
  keptForSession,
  sessionEnd,
  shelvesRestored,
  slotsHeld,
  standbyGivingUp,
  standbyRefresh,
  standbyRoom,
  standbysToRestore,
  type SessionContainer,
  type StandbyShelfState,
} from '../../../src/worker/core/containers/index.js';
import {
  ContainerBusyError,
  ContainerNotFoundError,
  ContainerOwnedError,
  ContainerUnavailableError,
} from '../../../src/worker/core/errors.js';

const shelf = (fields: Partial<StandbyShelfState> = {}): StandbyShelfState => ({
  perCheckpoint: 1,
  held: ['ckpt-a', 'ckpt-b'],
  dropped: new Set(),
  closed: false,
  ...fields,
});

const sessionContainer = (fields: Partial<SessionContainer> = {}): SessionContainer => ({
  state: 'ready',
  alive: true,
  sessionId: 's1',
  requestId: '',
  ...fields,
});

describe('worker core: container slots (WORKER_MAX_EXECUTORS)', () => {
  it('given containers held, busy or idle, when counted, then those being destroyed hold no slot and those starting do', () => {
    const held = [{ state: 'busy' }, { state: 'ready' }, { state: 'removed' }] as const;
    expect(slotsHeld(2, held)).to.equal(4);
    expect(slotsHeld(0, [])).to.equal(0);
  });

  it('given a full worker, when a call needs a container, then it is refused RESOURCE_EXHAUSTED naming the limit', () => {
    const admission = admitCall({ maxContainers: 2, held: 2, standbys: 0 });
    expect(admission.admitted).to.equal(false);
    const refusal = admission.admitted ? null : admission.refusal;
    expect(refusal).to.be.instanceOf(ContainerUnavailableError);
    expect(refusal?.code).to.equal('RESOURCE_EXHAUSTED');
    expect(refusal?.message).to.equal(
      'this worker already holds 2 containers, its limit (WORKER_MAX_EXECUTORS=2)',
    );
  });

  it('given standbys in every free slot, when a call needs one, then a standby gives its slot up', () => {
    expect(admitCall({ maxContainers: 3, held: 1, standbys: 2 })).to.deep.equal({
      admitted: true,
      standbyGivesUp: true,
    });
    expect(admitCall({ maxContainers: 3, held: 1, standbys: 1 })).to.deep.equal({
      admitted: true,
      standbyGivesUp: false,
    });
  });

  it('given no limit, then every call is admitted and standbys have unbounded room', () => {
    expect(admitCall({ maxContainers: 0, held: 500, standbys: 40 })).to.deep.equal({
      admitted: true,
      standbyGivesUp: false,
    });
    expect(standbyRoom({ maxContainers: 0, held: 500, standbys: 40 })).to.equal(Infinity);
  });

  it('given held containers and standbys, then standbys have the slots no call holds', () => {
    expect(standbyRoom({ maxContainers: 4, held: 1, standbys: 1 })).to.equal(2);
    expect(standbyRoom({ maxContainers: 4, held: 4, standbys: 1 })).to.equal(-1);
  });
});

describe('worker core: standby containers', () => {
  it('keeps standbys of held checkpoints only, not when off or dropped', () => {
    expect(keepsStandbys(shelf(), 'ckpt-a')).to.equal(true);
    expect(keepsStandbys(shelf(), 'ckpt-other')).to.equal(false);
    expect(keepsStandbys(shelf({ perCheckpoint: 0 }), 'ckpt-a')).to.equal(false);
    expect(keepsStandbys(shelf({ dropped: new Set(['ckpt-a']) }), 'ckpt-a')).to.equal(false);
  });

  it('given the count kept, when restocking, then it restores what is missing within the free slots', () => {
    const three = shelf({ perCheckpoint: 3 });
    expect(standbysToRestore(three, 'ckpt-a', 1, Infinity)).to.equal(2);
    expect(standbysToRestore(three, 'ckpt-a', 1, 1)).to.equal(1);
    expect(standbysToRestore(three, 'ckpt-a', 0, 0)).to.equal(0);
    expect(standbysToRestore(three, 'ckpt-a', 0, -2)).to.equal(0);
    expect(standbysToRestore(three, 'ckpt-a', 3, Infinity)).to.equal(0);
    expect(standbysToRestore(shelf({ closed: true }), 'ckpt-a', 0, Infinity)).to.equal(0);
    expect(standbysToRestore(three, 'ckpt-other', 0, Infinity)).to.equal(0);
  });

  it('given a standby restored, then it is shelved only while its checkpoint keeps standbys and the shelf is open', () => {
    expect(shelvesRestored(shelf(), 'ckpt-a')).to.equal(true);
    expect(shelvesRestored(shelf({ closed: true }), 'ckpt-a')).to.equal(false);
    expect(shelvesRestored(shelf({ held: ['ckpt-b'] }), 'ckpt-a')).to.equal(false);
  });

  it('given standbys on the shelf, when a call needs a slot, then one of another checkpoint goes, unless the call takes its own', () => {
    const shelved = new Map([
      ['ckpt-a', 0],
      ['ckpt-b', 2],
      ['ckpt-c', 1],
    ]);
    expect(standbyGivingUp(shelved, 'ckpt-c')).to.equal(null);
    expect(standbyGivingUp(shelved, 'ckpt-a')).to.equal('ckpt-b');
    expect(standbyGivingUp(shelved, '')).to.equal('ckpt-b');
    expect(standbyGivingUp(new Map([['ckpt-a', 0]]), 'ckpt-b')).to.equal(null);
  });

  it('given the held set changed, then standbys of checkpoints no longer held go and the held ones restock', () => {
    const refresh = standbyRefresh(shelf({ held: ['ckpt-b', 'ckpt-c', 'ckpt-b'] }), [
      'ckpt-a',
      'ckpt-b',
    ]);
    expect(refresh).to.deep.equal({ drop: ['ckpt-a'], restock: ['ckpt-b', 'ckpt-c'] });
  });
});

describe('worker core: idle session containers (EXECUTOR_TTL)', () => {
  it('given a session call that answered, then its container is kept, unless its session ended, it died or the pool closes', () => {
    const busy = { state: 'busy', alive: true, sessionEnded: false } as const;
    expect(keptForSession(busy, true, false)).to.equal(true);
    expect(keptForSession(busy, false, false)).to.equal(false);
    expect(keptForSession(busy, true, true)).to.equal(false);
    expect(keptForSession({ ...busy, sessionEnded: true }, true, false)).to.equal(false);
    expect(keptForSession({ ...busy, alive: false }, true, false)).to.equal(false);
    expect(keptForSession({ ...busy, state: 'removed' }, true, false)).to.equal(false);
  });

  it('given a call ended at t, then its container expires at t + EXECUTOR_TTL exactly, and at once when that has passed', () => {
    const endedAt = 1_700_000_000_000;
    expect(idleExpiresIn(endedAt, endedAt, 60_000)).to.equal(60_000);
    expect(idleExpiresIn(endedAt, endedAt + 45_000, 60_000)).to.equal(15_000);
    expect(idleExpiresIn(endedAt, endedAt + 90_000, 60_000)).to.equal(0);
  });

  it('given its time is up, then only a container still idle is destroyed', () => {
    expect(expiresIdle('ready')).to.equal(true);
    expect(expiresIdle('busy')).to.equal(false);
    expect(expiresIdle('removed')).to.equal(false);
  });
});

describe("worker core: a session's container belongs to that session", () => {
  it('given an idle container of s1, when a call of s1 resumes it, then it may', () => {
    expect(() => checkResumable(sessionContainer(), 'c1', 's1')).not.to.throw();
  });

  it('given a container gone or never here, then resuming it is NOT_FOUND', () => {
    for (const container of [
      undefined,
      sessionContainer({ state: 'removed' }),
      sessionContainer({ alive: false }),
    ]) {
      expect(() => checkResumable(container, 'c1', 's1')).to.throw(
        ContainerNotFoundError,
        'container c1 is not on this worker (it was destroyed or never created here)',
      );
    }
  });

  it('given a container of s1, when a call of another session or of none resumes it, then it is refused', () => {
    expect(() => checkResumable(sessionContainer(), 'c1', 's2')).to.throw(
      ContainerOwnedError,
      'container c1 does not belong to session s2: only the session that created it may resume it',
    );
    expect(() => checkResumable(sessionContainer(), 'c1', '')).to.throw(
      ContainerOwnedError,
      'container c1 belongs to a session: a call without that session cannot resume it',
    );
    expect(() => checkResumable(sessionContainer({ sessionId: '' }), 'c1', '')).to.throw(
      ContainerOwnedError,
    );
  });

  it('given a busy container of s1, when another call of s1 resumes it, then it is busy', () => {
    const busy = sessionContainer({ state: 'busy', requestId: 'r7' });
    expect(() => checkResumable(busy, 'c1', 's1')).to.throw(
      ContainerBusyError,
      'container c1 is busy with request r7',
    );
  });

  it('given a container of s1, when s1 ends, then it is destroyed now, or after the call running in it', () => {
    expect(sessionEnd(sessionContainer(), 'c1', 's1')).to.deep.equal({ step: 'destroy' });
    expect(sessionEnd(sessionContainer({ state: 'busy' }), 'c1', 's1')).to.deep.equal({
      step: 'after-call',
    });
    expect(sessionEnd(undefined, 'c1', 's1')).to.deep.equal({ step: 'not-held' });
    expect(sessionEnd(sessionContainer({ state: 'removed' }), 'c1', 's1')).to.deep.equal({
      step: 'not-held',
    });
  });

  it("given a container of s1, when another session's end names it, then it is refused", () => {
    const end = sessionEnd(sessionContainer(), 'c1', 's2');
    expect(end.step).to.equal('refused');
    expect(end.step === 'refused' && end.refusal).to.be.instanceOf(ContainerOwnedError);
    expect(end.step === 'refused' && end.refusal.message).to.equal(
      "container c1 does not belong to session s2: only its own session's end destroys it",
    );
  });
});
