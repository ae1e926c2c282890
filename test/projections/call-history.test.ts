import { expect } from 'chai';
import type { NewEvent } from '../../src/events/index.js';
import { CallHistory, type HistoryBounds } from '../../src/projections/index.js';
import { callView } from '../../src/projections/call-view.js';
import { decodeLogValue, encodeLogValue } from '../../src/events/codec/stored-codec.js';
import { ByteWriter } from '../../src/events/codec/byte-buffers.js';
import {
  atOf,
  demand,
  history,
  placed,
  registered,
  requested,
  START_MS,
} from '../support/events.js';

const ROOMY: HistoryBounds = { maxCalls: 100, retentionMs: 3_600_000 };

/** A history fed `events`, stamped one second apart from seq 1. */
function fed(events: NewEvent[], bounds: HistoryBounds = ROOMY): CallHistory {
  const calls = new CallHistory(bounds);
  for (const event of history(...events).events) calls.observe(event);
  return calls;
}

const bound = (requestId: string, containerId: string): NewEvent => ({
  type: 'CallBound',
  requestId,
  containerId,
  checkpointId: 'ckpt',
});
const finished = (
  requestId: string,
  code: 'UNAVAILABLE' | null,
  message: string | null = null,
): NewEvent => ({
  type: 'CallFinished',
  requestId,
  ok: code === null,
  code,
  message,
  raised: null,
  inputsRaised: null,
});

describe('projection: the call history', () => {
  it('given a call requested, placed, bound and finished, then it holds every step with its time, where it ran and how long it took', () => {
    const calls = fed([
      registered('w1'),
      requested('r1', { tenantId: 'acme', function: 'jobs.score', sessionId: 's1' }),
      placed('r1', 'w1', { sessionId: 's1', checkpointId: 'ckpt' }),
      bound('r1', 'c9'),
      finished('r1', null),
    ]);
    const call = calls.get('r1');
    expect(call).to.include({
      requestId: 'r1',
      tenantId: 'acme',
      function: 'jobs.score',
      sessionId: 's1',
      state: 'succeeded',
      code: 'OK',
      requestedAt: atOf(2),
      requestedSeq: 2,
      boundAt: atOf(4),
      boundContainerId: 'c9',
      finishedAt: atOf(5),
      durationMs: 3000,
      queuedAt: null,
      admittedAt: null,
    });
    expect(call?.attempts).to.have.length(1);
    expect(call?.attempts[0]).to.include({
      workerId: 'w1',
      checkpointId: 'ckpt',
      placedAt: atOf(3),
    });
  });

  it("given another tenant's call reusing a request ID the history holds, refused ALREADY_EXISTS (or as its session was busy), then the owner's record is unchanged and the other tenant sees nothing; once placed (the router had forgotten the ID), it is the new call's", () => {
    const refused: NewEvent = {
      type: 'CallRejected',
      requestId: 'r1',
      sessionId: null,
      code: 'ALREADY_EXISTS',
      message: 'request ID r1 is in use',
      version: null,
      routingRevision: null,
      retryAfterMs: null,
    };
    const owned = [
      registered('w1'),
      requested('r1', { tenantId: 'acme', function: 'jobs.score' }),
      placed('r1', 'w1'),
      bound('r1', 'c9'),
      finished('r1', null),
    ];
    const calls = fed([
      ...owned,
      requested('r1', { tenantId: 'globex' }),
      refused,
      {
        type: 'SessionTurnRefused',
        requestId: 'r1',
        sessionId: 'g1',
        tenantId: 'globex',
        waitedMs: 60_000,
        ahead: 1,
      },
    ]);
    expect(calls.get('r1')).to.include({
      tenantId: 'acme',
      function: 'jobs.score',
      state: 'succeeded',
      boundContainerId: 'c9',
      requestedSeq: 2,
    });
    expect(calls.list({ tenantId: 'globex' })).to.deep.equal([]);
    expect(calls.list({ tenantId: 'acme' }).map((call) => call.requestId)).to.deep.equal(['r1']);
    // Placed, not refused: the router no longer remembered the ID, so it is a new call of it.
    const reused = fed([...owned, requested('r1', { tenantId: 'globex' }), placed('r1', 'w1')]);
    expect(reused.get('r1')).to.include({ tenantId: 'globex', state: 'placed' });
    expect(reused.list({ tenantId: 'acme' })).to.deep.equal([]);
  });

  it('given a call whose first worker could not be dialed, then each placement is an attempt, the failed one with its error', () => {
    const calls = fed([
      registered('w1'),
      registered('w2'),
      requested('r1'),
      placed('r1', 'w1'),
      { type: 'CallDialFailed', requestId: 'r1', workerId: 'w1', error: 'connection refused' },
      placed('r1', 'w2'),
      bound('r1', 'c1'),
      finished('r1', 'UNAVAILABLE', 'worker w2: the executor went away'),
    ]);
    const call = calls.get('r1');
    expect(call?.state).to.equal('failed');
    expect(call?.code).to.equal('UNAVAILABLE');
    expect(call?.message).to.equal('worker w2: the executor went away');
    expect(call?.attempts.map((a) => [a.workerId, a.dialError])).to.deep.equal([
      ['w1', 'connection refused'],
      ['w2', null],
    ]);
    expect(call?.attempts[0]?.dialFailedAt).to.equal(atOf(5));
  });

  it('given a call that ended OK but whose function raised, then it is raised (code OK), says what, and --failed lists it', () => {
    const calls = fed([
      registered('w1'),
      requested('ok'),
      placed('ok', 'w1'),
      finished('ok', null),
      requested('r1', { function: 'jobs.score' }),
      placed('r1', 'w1'),
      bound('r1', 'c1'),
      { ...finished('r1', null), raised: { type: 'ValueError', message: 'bad input' } } as NewEvent,
    ]);
    expect(calls.get('r1')).to.deep.include({
      state: 'raised',
      code: 'OK',
      message: 'raised ValueError: bad input',
      raised: { type: 'ValueError', message: 'bad input' },
    });
    expect(calls.get('ok')).to.include({ state: 'succeeded', raised: null, message: null });
    expect(calls.list({ failed: true }).map((c) => c.requestId)).to.deep.equal(['r1']);
    expect(callView(calls.get('r1')!)).to.include({
      state: 'raised',
      raisedType: 'ValueError',
      raisedMessage: 'bad input',
    });
  });

  it('given a batch of a map and a plain call, then the batch shows how many inputs it carried, the plain call none', () => {
    const calls = fed([
      registered('w1'),
      requested('batch', { function: 'jobs.score', sessionId: 's1', inputs: 25 }),
      placed('batch', 'w1', { sessionId: 's1' }),
      bound('batch', 'c1'),
      finished('batch', null),
      requested('plain', { function: 'jobs.score' }),
    ]);
    expect(calls.get('batch')).to.include({ inputs: 25, state: 'succeeded', inputsRaised: null });
    expect(calls.get('plain')).to.include({ inputs: null });
    expect(callView(calls.get('batch')!).inputs).to.equal(25);
    expect(callView(calls.get('plain')!).inputs).to.equal(undefined);
  });

  it("given batches whose worker counted raised inputs, then each shows how many (never more than it carried), and --failed lists those with any; a plain call's count is ignored", () => {
    const batch = (requestId: string, inputs: number) => [
      requested(requestId, { function: 'jobs.score', inputs }),
      placed(requestId, 'w1'),
      bound(requestId, `c-${requestId}`),
    ];
    const ended = (requestId: string, inputsRaised: number | null): NewEvent =>
      ({
        ...finished(requestId, null),
        inputsRaised,
      }) as NewEvent;
    const calls = fed([
      registered('w1'),
      ...batch('some', 25),
      ended('some', 2),
      ...batch('none', 25),
      ended('none', 0),
      ...batch('forged', 3),
      ended('forged', 900),
      requested('plain'),
      placed('plain', 'w1'),
      ended('plain', 5),
    ]);
    expect(calls.get('some')).to.include({ state: 'succeeded', inputs: 25, inputsRaised: 2 });
    expect(calls.get('none')).to.include({ inputsRaised: 0 });
    expect(calls.get('forged')).to.include({ inputsRaised: 3 });
    expect(calls.get('plain')).to.include({ inputs: null, inputsRaised: null });
    expect(callView(calls.get('some')!)).to.include({ inputs: 25, inputsRaised: 2 });
    expect(calls.list({ failed: true }).map((c) => c.requestId)).to.deep.equal(['forged', 'some']);
  });

  it('given a refused call and a force-released one, then they are rejected (with the code and message) and expired', () => {
    const calls = fed([
      requested('r1'),
      {
        type: 'CallRejected',
        requestId: 'r1',
        sessionId: null,
        code: 'UNAVAILABLE',
        message: 'no worker',
        version: null,
        routingRevision: null,
        retryAfterMs: null,
      },
      registered('w1'),
      requested('r2'),
      placed('r2', 'w1'),
      { type: 'ReservationExpired', requestId: 'r2' },
    ]);
    expect(calls.get('r1')).to.include({
      state: 'rejected',
      code: 'UNAVAILABLE',
      message: 'no worker',
    });
    expect(calls.get('r2')?.state).to.equal('expired');
    expect(calls.list({ failed: true }).map((c) => c.requestId)).to.deep.equal(['r2', 'r1']);
  });

  it('given more calls than HISTORY_MAX_CALLS, then the oldest are forgotten first and the count never passes the bound', () => {
    const events: NewEvent[] = [registered('w1')];
    for (let i = 0; i < 10; i += 1) events.push(requested(`r${i}`), placed(`r${i}`, 'w1'));
    const calls = fed(events, { maxCalls: 4, retentionMs: 3_600_000 });
    expect(calls.size).to.equal(4);
    expect(calls.list().map((c) => c.requestId)).to.deep.equal(['r9', 'r8', 'r7', 'r6']);
    expect(calls.get('r5')).to.equal(undefined);
  });

  it('given calls older than HISTORY_RETENTION, then a later event or a query forgets them, and the window says what is left', () => {
    const calls = fed([requested('r1'), requested('r2'), requested('r3')], {
      maxCalls: 100,
      retentionMs: 1_500,
    });
    // r1 (at 1 s) is past 1.5 s when r3 (at 3 s) arrives; r2 (at 2 s) is not.
    expect(calls.list().map((c) => c.requestId)).to.deep.equal(['r3', 'r2']);
    calls.forgetDue(new Date(START_MS + 10_000).toISOString());
    expect(calls.size).to.equal(0);
    expect(calls.window()).to.include({ calls: 0, oldestRequestedAt: null, maxCalls: 100 });
  });

  it('given calls of two tenants and functions, then a query narrows by tenant, function, time and count, newest first', () => {
    const calls = fed([
      requested('a1', { tenantId: 'acme', function: 'f' }),
      requested('b1', { tenantId: 'bolt', function: 'f' }),
      requested('a2', { tenantId: 'acme', function: 'g' }),
      requested('a3', { tenantId: 'acme', function: 'f' }),
    ]);
    expect(calls.list({ tenantId: 'acme' }).map((c) => c.requestId)).to.deep.equal([
      'a3',
      'a2',
      'a1',
    ]);
    expect(calls.list({ tenantId: 'acme', function: 'f' }).map((c) => c.requestId)).to.deep.equal([
      'a3',
      'a1',
    ]);
    expect(calls.list({ sinceMs: START_MS + 2_000 }).map((c) => c.requestId)).to.deep.equal([
      'a3',
      'a2',
      'b1',
    ]);
    expect(calls.list({ limit: 1 }).map((c) => c.requestId)).to.deep.equal(['a3']);
  });

  it('given events of calls it never saw requested (before its window), then it ignores them', () => {
    const calls = fed([
      registered('w1'),
      placed('old', 'w1'),
      bound('old', 'c1'),
      finished('old', null),
    ]);
    expect(calls.size).to.equal(0);
  });

  it('given a request ID used again after its call ended, then the history holds the newer call', () => {
    const calls = fed([requested('r1', { function: 'old' }), requested('r1', { function: 'new' })]);
    expect(calls.size).to.equal(1);
    expect(calls.get('r1')?.function).to.equal('new');
  });

  it("given a full history that reuses the records it forgot, then a new call shows only its own steps, never a forgotten call's", () => {
    const calls = fed(
      [
        registered('w1'),
        registered('w2'),
        requested('old', { tenantId: 'acme', function: 'f', sessionId: 's1', turnWaitMs: 5 }),
        placed('old', 'w1', { sessionId: 's1', checkpointId: 'ckpt' }),
        { type: 'CallDialFailed', requestId: 'old', workerId: 'w1', error: 'refused' },
        placed('old', 'w2', { sessionId: 's1' }),
        bound('old', 'c1'),
        finished('old', 'UNAVAILABLE', 'gone'),
        // A request ID used twice: its first record is replaced, not reused while `order` names it.
        requested('twice', { function: 'first' }),
        requested('twice', { function: 'second' }),
        // Past the bound of 2: 'old' and the first 'twice' are forgotten, 'old' is reused first.
        requested('new1'),
        requested('new2', { tenantId: 'bolt' }),
        placed('new2', 'w2'),
      ],
      { maxCalls: 2, retentionMs: 3_600_000 },
    );
    expect(calls.list().map((c) => [c.requestId, c.function])).to.deep.equal([
      ['new2', null],
      ['new1', null],
    ]);
    expect(calls.get('old')).to.equal(undefined);
    expect(calls.get('twice')).to.equal(undefined);
    expect(calls.get('new2')).to.include({
      tenantId: 'bolt',
      sessionId: null,
      turnWaitMs: null,
      state: 'placed',
      boundAt: null,
      boundContainerId: null,
      finishedAt: null,
      durationMs: null,
      code: null,
      message: null,
    });
    expect(calls.get('new2')?.attempts).to.have.length(1);
    expect(calls.get('new2')?.attempts[0]).to.include({
      workerId: 'w2',
      checkpointId: null,
      placedAt: atOf(13),
      dialError: null,
      dialFailedAt: null,
    });
    expect(calls.get('new1')?.attempts).to.have.length(0);
    expect(calls.window()).to.include({ calls: 2, oldestRequestedAt: atOf(11) });
  });

  it('reports an estimate of its memory that grows with what it holds', () => {
    const small = fed([requested('r1')]).window().approxBytes;
    const large = fed([requested('r1'), requested('r2', { function: 'x'.repeat(200) })]).window()
      .approxBytes;
    expect(small).to.be.greaterThan(0);
    expect(large).to.be.greaterThan(2 * small);
  });

  it('given a session call that waited for its turn, and one refused "session is busy", then each shows its wait, the refused one as rejected', () => {
    const calls = fed([
      requested('waited', { sessionId: 's1', turnWaitMs: 1200 }),
      {
        type: 'SessionTurnRefused',
        requestId: 'busy',
        sessionId: 's1',
        tenantId: 'acme',
        waitedMs: 60_000,
        ahead: 1,
      },
    ]);
    expect(calls.get('waited')?.turnWaitMs).to.equal(1200);
    expect(calls.get('busy')).to.include({
      state: 'rejected',
      code: 'RESOURCE_EXHAUSTED',
      tenantId: 'acme',
      turnWaitMs: 60_000,
      durationMs: 60_000,
      finishedAt: atOf(2),
    });
    expect(calls.get('busy')?.message).to.match(/^session is busy/);
  });

  describe('the admission queue', () => {
    const queued = (requestId: string, why = 'no worker has 2 free slots'): NewEvent => ({
      type: 'CallQueued',
      requestId,
      sessionId: null,
      tenantId: 'acme',
      demand: demand(),
      retryOf: null,
      why,
    });
    const admitted = (requestId: string): NewEvent => ({ type: 'CallAdmitted', requestId });
    const left = (
      requestId: string,
      reason: 'deadline' | 'cancelled' | 'timeout' | 'restart',
      code: 'DEADLINE_EXCEEDED' | 'CANCELLED' | 'RESOURCE_EXHAUSTED' | 'UNAVAILABLE',
      message: string,
    ): NewEvent => ({ type: 'CallLeftQueue', requestId, reason, code, message });

    it('given a call queued, then admitted, placed, bound and finished, then it shows queued with why, and the wait once admitted', () => {
      const calls = fed([registered('w1'), requested('r1', { tenantId: 'acme' }), queued('r1')]);
      expect(calls.get('r1')).to.include({
        state: 'queued',
        queuedAt: atOf(3),
        queuedWhy: 'no worker has 2 free slots',
        admittedAt: null,
        queueWaitMs: null,
        finishedAt: null,
      });
      expect(calls.list({ failed: true })).to.have.length(0);
      const done = fed([
        registered('w1'),
        requested('r1', { tenantId: 'acme' }),
        queued('r1'),
        requested('other'),
        admitted('r1'),
        placed('r1', 'w1'),
        bound('r1', 'c1'),
        finished('r1', null),
      ]);
      expect(done.get('r1')).to.include({
        state: 'succeeded',
        queuedAt: atOf(3),
        admittedAt: atOf(5),
        queueWaitMs: 2000,
        durationMs: 6000,
        code: 'OK',
      });
      expect(callView(done.get('r1')!)).to.include({
        state: 'succeeded',
        queuedAt: atOf(3),
        admittedAt: atOf(5),
        queuedWhy: 'no worker has 2 free slots',
        queueWaitMs: 2000,
        placedAt: atOf(6),
      });
    });

    it('given queued calls that left the queue for each reason, then each is rejected with its code, says why and how long it waited, and --failed lists it', () => {
      const calls = fed([
        requested('late'),
        queued('late'),
        requested('gone'),
        queued('gone'),
        requested('slow'),
        queued('slow'),
        requested('restarted'),
        queued('restarted'),
        left('late', 'deadline', 'DEADLINE_EXCEEDED', 'the deadline passed'),
        left('gone', 'cancelled', 'CANCELLED', 'the client cancelled the call'),
        left('slow', 'timeout', 'RESOURCE_EXHAUSTED', 'queued for 10m: no room (QUEUE_TIMEOUT)'),
        left(
          'restarted',
          'restart',
          'UNAVAILABLE',
          'the router restarted while the call waited in its queue',
        ),
      ]);
      expect(calls.get('late')).to.include({
        state: 'rejected',
        code: 'DEADLINE_EXCEEDED',
        queueWaitMs: 7000,
        finishedAt: atOf(9),
        durationMs: 8000,
        admittedAt: null,
        message: "left the queue after 7.0s (its client's deadline passed): the deadline passed",
      });
      expect(calls.get('gone')).to.include({
        code: 'CANCELLED',
        message:
          'left the queue after 6.0s (its client cancelled it): the client cancelled the call',
      });
      // A timeout's words already tell the wait, as its client heard them.
      expect(calls.get('slow')).to.include({
        code: 'RESOURCE_EXHAUSTED',
        message: 'queued for 10m: no room (QUEUE_TIMEOUT)',
        queueWaitMs: 5000,
      });
      expect(calls.get('restarted')?.message).to.equal(
        'left the queue after 4.0s: the router restarted while the call waited in its queue',
      );
      expect(calls.list({ failed: true }).map((c) => c.requestId)).to.have.members([
        'late',
        'gone',
        'slow',
        'restarted',
      ]);
    });

    it('given a queued reason longer than the history keeps, then it keeps a bounded prefix', () => {
      const calls = fed([requested('r1'), queued('r1', 'x'.repeat(10_000))]);
      const why = calls.get('r1')!.queuedWhy!;
      expect(why.length).to.equal(256);
      expect(why.endsWith('…')).to.equal(true);
    });

    it('given a bounded history full of queued calls, then the oldest is forgotten though it still waits, and a reused record carries no queue of the call before', () => {
      const calls = fed(
        [
          requested('q1'),
          queued('q1'),
          admitted('q1'),
          requested('q2'),
          queued('q2'),
          requested('q3'),
          queued('q3'),
          requested('fresh'),
          admitted('q2'),
        ],
        { maxCalls: 2, retentionMs: 3_600_000 },
      );
      expect(calls.size).to.equal(2);
      expect(calls.get('q1')).to.equal(undefined);
      expect(calls.get('q2')).to.equal(undefined);
      expect(calls.list().map((c) => [c.requestId, c.state])).to.deep.equal([
        ['fresh', 'placed'],
        ['q3', 'queued'],
      ]);
      expect(calls.get('fresh')).to.include({
        queuedAt: null,
        admittedAt: null,
        queuedWhy: null,
        queueWaitMs: null,
      });
    });

    it('given the events of queued calls written to a log and read back, then the history read from the log is the one folded live', () => {
      const events = history(
        registered('w1'),
        requested('a', { tenantId: 'acme' }),
        queued('a'),
        requested('b', { tenantId: 'acme' }),
        queued('b', '1 earlier call of its tenant wait first'),
        admitted('a'),
        placed('a', 'w1'),
        left('b', 'timeout', 'RESOURCE_EXHAUSTED', 'queued for 10m: no room (QUEUE_TIMEOUT)'),
        bound('a', 'c1'),
        finished('a', null),
      ).events;
      const live = new CallHistory(ROOMY);
      const read = new CallHistory(ROOMY);
      const scratch = new ByteWriter();
      for (const event of events) {
        live.observe(event);
        const value = encodeLogValue(event, undefined, 'append', scratch);
        read.observe(decodeLogValue(Buffer.from(value), event.seq).event);
      }
      const views = (calls: CallHistory) => calls.list().map(callView);
      expect(views(read)).to.deep.equal(views(live));
      expect(views(live).map((c) => [c.requestId, c.state, c.queueWaitMs])).to.deep.equal([
        ['b', 'rejected', 3000],
        ['a', 'succeeded', 3000],
      ]);
    });
  });
});
