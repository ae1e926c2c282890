import { expect } from 'chai';
import { EVENT_SCHEMA_VERSION, type NewEvent } from '../../src/events/index.js';
import {
  answerIds,
  boundEvents,
  decideCallEnd,
  departureOf,
  workerEnding,
} from '../../src/core/calls/call-steps.js';
import {
  boundedRaised,
  inputsRaisedOfTrailers,
  inputsRaisedTrailers,
  MAX_RAISED_MESSAGE_LENGTH,
  raisedOfTrailers,
  raisedTrailers,
} from '../../src/shared/raised.js';
import {
  callFinishedEvents,
  evictionEvents,
  seqAfter,
  reservationExpiredEvents,
} from '../../src/core/consequences/index.js';
import {
  decideProbeSuccess,
  nextProbeFailureCount,
  probeFailureEvents,
} from '../../src/core/liveness/probe-outcome.js';
import {
  containerReportEvents,
  statusReportEvents,
  utilizationReportEvents,
  type StatusOutcome,
  type StatusReport,
} from '../../src/core/registry/report-events.js';
import { PLACEMENT_RULES_VERSION } from '../../src/core/placement/index.js';
import { TurnQueue } from '../../src/core/sessions/turn-queue.js';
import {
  catalogueEvents,
  inFlightReleaseEvents,
  routerStartedEvent,
} from '../../src/core/startup/startup-events.js';
import { DEFAULT_CONFIG } from '../../src/shared/config.js';
import {
  container,
  finished,
  history,
  pinned,
  placed,
  registered,
  utilization,
} from '../support/events.js';

const bound = (requestId: string, containerId: string): NewEvent => ({
  type: 'CallBound',
  requestId,
  containerId,
  checkpointId: null,
});

describe('router core (pure)', () => {
  describe('consequences', () => {
    it('evicting a worker expires every session pinned there, once', () => {
      const given = history(
        registered('w1'),
        container('w1', 'c1', 'ready'),
        container('w1', 'c2', 'busy'),
        pinned('s1', 'w1', 'c1'),
        pinned('s2', 'w1', 'c2'),
      );
      // The eviction is appended next: the sessions' expiries name its seq.
      const at = seqAfter(given.state());
      const events = evictionEvents(given.state(), 'w1', 'probe', at);
      expect(events).to.deep.equal([
        { type: 'WorkerEvicted', workerId: 'w1', reason: 'probe' },
        { type: 'SessionExpired', sessionId: 's1', reason: 'worker_evicted', causeSeq: at },
        { type: 'SessionExpired', sessionId: 's2', reason: 'worker_evicted', causeSeq: at },
      ]);
      given.add(...events);
      expect(evictionEvents(given.state(), 'w1', 'ttl', at)).to.deep.equal([]);
      expect(evictionEvents(given.state(), 'nobody', 'ttl', at)).to.deep.equal([]);
    });

    it('a failed call that created its session pin unpins it; a successful one does not', () => {
      const given = history(
        registered('w1'),
        placed('r1', 'w1', { sessionId: 's1' }),
        bound('r1', 'c1'),
        pinned('s1', 'w1', 'c1', 'r1'),
      );
      expect(callFinishedEvents(given.state(), 'r1', 'UNAVAILABLE')).to.deep.equal([
        {
          type: 'CallFinished',
          requestId: 'r1',
          ok: false,
          code: 'UNAVAILABLE',
          message: null,
          raised: null,
          inputsRaised: null,
        },
        { type: 'SessionUnpinned', sessionId: 's1', reason: 'call_failed' },
      ]);
      expect(callFinishedEvents(given.state(), 'r1', null)).to.deep.equal([finished('r1')]);
    });

    it('a failed call reusing the session container leaves the pin to its creator', () => {
      const given = history(
        registered('w1'),
        container('w1', 'c1', 'ready'),
        pinned('s1', 'w1', 'c1', 'r0'),
        placed('r1', 'w1', { sessionId: 's1', containerId: 'c1' }),
        pinned('s1', 'w1', 'c1', 'r1'),
      );
      expect(callFinishedEvents(given.state(), 'r1', 'INTERNAL')).to.deep.equal([
        {
          type: 'CallFinished',
          requestId: 'r1',
          ok: false,
          code: 'INTERNAL',
          message: null,
          raised: null,
          inputsRaised: null,
        },
      ]);
    });

    it('a call finishes in the log even when its reservation was force-released already', () => {
      const given = history(registered('w1'), placed('r1', 'w1'), {
        type: 'ReservationExpired',
        requestId: 'r1',
      });
      expect(callFinishedEvents(given.state(), 'r1', 'CANCELLED')).to.deep.equal([
        {
          type: 'CallFinished',
          requestId: 'r1',
          ok: false,
          code: 'CANCELLED',
          message: null,
          raised: null,
          inputsRaised: null,
        },
      ]);
      expect(reservationExpiredEvents(given.state(), 'r1')).to.deep.equal([]);
    });
  });

  describe('probe outcomes', () => {
    const config = { ...DEFAULT_CONFIG, PROBE_FAILURE_THRESHOLD: 3 };

    it('counts consecutive failures from the log and evicts at the threshold with the consequences', () => {
      const given = history(
        registered('w1'),
        container('w1', 'c1', 'ready'),
        pinned('s1', 'w1', 'c1'),
        { type: 'WorkerProbeFailed', workerId: 'w1', consecutive: 1, error: null },
      );
      expect(probeFailureEvents(given.state(), 'w1', 'down', config)).to.deep.equal([
        { type: 'WorkerProbeFailed', workerId: 'w1', consecutive: 2, error: 'down' },
      ]);
      given.add({ type: 'WorkerProbeFailed', workerId: 'w1', consecutive: 2, error: null });
      expect(probeFailureEvents(given.state(), 'w1', 'down', config)).to.deep.equal([
        { type: 'WorkerProbeFailed', workerId: 'w1', consecutive: 3, error: 'down' },
        { type: 'WorkerEvicted', workerId: 'w1', reason: 'probe' },
        // Ended by the eviction, the decision's second event.
        {
          type: 'SessionExpired',
          sessionId: 's1',
          reason: 'worker_evicted',
          causeSeq: given.lastSeq + 2,
        },
      ]);
    });

    it('only a successful probe restarts the count, and it does so in the log; a report does not', () => {
      const given = history(registered('w1'), {
        type: 'WorkerProbeFailed',
        workerId: 'w1',
        consecutive: 2,
        error: null,
      });
      expect(nextProbeFailureCount(given.state(), 'w1')).to.equal(3);
      given.add(utilization('w1'), container('w1', 'c1', 'busy'));
      expect(nextProbeFailureCount(given.state(), 'w1'), 'reports change nothing').to.equal(3);
      given.add(registered('w1'));
      expect(nextProbeFailureCount(given.state(), 'w1'), 'nor does registering again').to.equal(3);
      const success = decideProbeSuccess(given.state(), { workerId: 'w1' });
      expect(success).to.deep.equal({
        cause: { kind: 'probe', workerId: 'w1' },
        events: [{ type: 'WorkerProbeSucceeded', workerId: 'w1' }],
      });
      given.add(...success.events);
      expect(nextProbeFailureCount(given.state(), 'w1')).to.equal(1);
      expect(
        decideProbeSuccess(given.state(), { workerId: 'w1' }).events,
        'nothing to reset: nothing logged',
      ).to.deep.equal([]);
      given.add(registered('w1', { address: 'elsewhere:1' }), {
        type: 'WorkerProbeFailed',
        workerId: 'w1',
        consecutive: 1,
        error: null,
      });
      given.add(registered('w1', { address: 'moved:2' }));
      expect(nextProbeFailureCount(given.state(), 'w1'), 'another address starts over').to.equal(1);
    });

    it('says nothing about an evicted worker', () => {
      const given = history(registered('w1'), {
        type: 'WorkerEvicted',
        workerId: 'w1',
        reason: 'ttl',
      });
      expect(probeFailureEvents(given.state(), 'w1', 'down', config)).to.deep.equal([]);
    });
  });

  describe('worker reports', () => {
    const ready: StatusReport = {
      workerId: 'w1',
      status: 'ready',
      address: '127.0.0.1:5000',
      error: null,
      flavor: 'gpu',
      memoryTotal: 1024,
      maxContainers: 4,
      gpuMemoryTotal: 2048,
      instanceId: null,
      containers: null,
      reportSeq: null,
    };
    const eventsOf = (outcome: StatusOutcome) => (outcome.kind === 'events' ? outcome.events : []);

    it('registers ready and error statuses; removed means leaving', () => {
      const given = history();
      expect(eventsOf(statusReportEvents(given.state(), ready))).to.deep.equal([
        {
          type: 'WorkerRegistered',
          workerId: 'w1',
          address: '127.0.0.1:5000',
          status: 'ready',
          error: null,
          flavor: 'gpu',
          memoryTotal: 1024,
          maxContainers: 4,
          gpuMemoryTotal: 2048,
          instanceId: null,
          containers: null,
          reportSeq: null,
        },
      ]);
      const broken = eventsOf(
        statusReportEvents(given.state(), { ...ready, status: 'error', error: null }),
      );
      expect(broken[0]).to.include({ status: 'error', error: 'no reason given' });
      expect(
        eventsOf(statusReportEvents(given.state(), { ...ready, status: 'removed' })),
        'unknown',
      ).to.eql([]);
      given.add(...eventsOf(statusReportEvents(given.state(), ready)));
      expect(
        eventsOf(statusReportEvents(given.state(), { ...ready, status: 'removed' })),
      ).to.deep.equal([{ type: 'WorkerLeaving', workerId: 'w1' }]);
    });

    it('asks an unknown or evicted worker to register instead of recording its reports', () => {
      const load = {
        workerId: 'w1',
        memoryUsed: 1,
        containerCount: 0,
        cpuUsed: 0,
        cpuTotal: null,
        gpuMemoryUsed: 0,
        instanceId: null,
        containers: null,
        reportSeq: null,
      };
      expect(utilizationReportEvents(history().state(), load)).to.deep.equal({
        registered: false,
        events: [],
      });
      const evicted = history(registered('w1'), {
        type: 'WorkerEvicted',
        workerId: 'w1',
        reason: 'ttl',
      });
      expect(utilizationReportEvents(evicted.state(), load).registered).to.equal(false);
      expect(
        containerReportEvents(evicted.state(), {
          workerId: 'w1',
          containerId: 'c1',
          state: 'ready',
          checkpointId: null,
          instanceId: null,
          reportSeq: null,
        }).registered,
      ).to.equal(false);
      expect(utilizationReportEvents(history(registered('w1')).state(), load)).to.deep.equal({
        registered: true,
        events: [
          {
            type: 'WorkerUtilization',
            workerId: 'w1',
            memoryUsed: 1,
            containerCount: 0,
            cpuUsed: 0,
            cpuTotal: null,
            gpuMemoryUsed: 0,
            containers: null,
            reportSeq: null,
            // A report that lists no standbys (an older worker) records none.
            standbys: null,
          },
        ],
      });
    });

    it('a removed container expires the session pinned there', () => {
      const given = history(
        registered('w1'),
        container('w1', 'c1', 'ready'),
        pinned('s1', 'w1', 'c1'),
      );
      expect(
        containerReportEvents(given.state(), {
          workerId: 'w1',
          containerId: 'c1',
          state: 'removed',
          checkpointId: 'ckpt',
          instanceId: null,
          reportSeq: null,
        }),
      ).to.deep.equal({
        registered: true,
        events: [
          {
            type: 'ContainerStateChanged',
            workerId: 'w1',
            containerId: 'c1',
            state: 'removed',
            checkpointId: 'ckpt',
            reportSeq: null,
          },
          {
            type: 'SessionExpired',
            sessionId: 's1',
            reason: 'container_removed',
            // Ended by the removal, the decision's first event.
            causeSeq: given.lastSeq + 1,
          },
        ],
      });
    });
  });

  describe('startup and recovery', () => {
    it("records the config, the version and the placement rules' version, never anything but the settings", () => {
      const event = routerStartedEvent(DEFAULT_CONFIG, '1.2.3');
      expect(event).to.deep.equal({
        type: 'RouterStarted',
        config: { ...DEFAULT_CONFIG },
        version: '1.2.3',
        rulesVersion: PLACEMENT_RULES_VERSION,
        routerId: null,
        takeoverFrom: null,
        schemaVersion: EVENT_SCHEMA_VERSION,
      });
    });

    it('skips a catalogue whose revision is already in force', () => {
      const catalogue = { flavors: {}, importCosts: {}, defaultImportCost: 1 };
      const given = history({ type: 'CatalogueLoaded', revision: 'r1', catalogue });
      expect(catalogueEvents(given.state(), catalogue, 'r1')).to.deep.equal([]);
      expect(catalogueEvents(given.state(), catalogue, 'r2')).to.have.length(1);
    });

    it('force-releases the calls in flight, keeping pins that finished calls created', () => {
      const given = history(
        registered('w1'),
        placed('r0', 'w1', { sessionId: 's0' }),
        bound('r0', 'c0'),
        pinned('s0', 'w1', 'c0', 'r0'),
        finished('r0'),
        placed('r1', 'w1', { sessionId: 's0', containerId: 'c0' }),
        placed('r2', 'w1', { sessionId: 's2' }),
        bound('r2', 'c2'),
        pinned('s2', 'w1', 'c2', 'r2'),
      );
      const events = inFlightReleaseEvents(given.state());
      expect(events).to.deep.equal([
        { type: 'ReservationExpired', requestId: 'r1' },
        { type: 'ReservationExpired', requestId: 'r2' },
        { type: 'SessionUnpinned', sessionId: 's2', reason: 'reservation_expired' },
      ]);
      given.add(...events);
      expect(given.state().reservations.size).to.equal(0);
      expect(given.state().sessions.get('s0')?.pin?.containerId).to.equal('c0');
    });
  });

  describe('call steps', () => {
    const placedDecision = {
      outcome: 'placed' as const,
      events: [],
      workerId: 'w1',
      containerId: null,
      checkpointId: 'ckpt',
      packages: [],
      skippedPackages: [],
      memory: 1,
      version: null,
      routingRevision: null,
      coldLoad: false,
    };
    const ids = {
      requestId: 'r1',
      sessionId: 's1',
      workerId: 'w1',
      containerId: '',
      checkpointId: '',
      version: '',
      routingRevision: 0,
    };

    it("the first answer binds the call; a session's new container is pinned with the checkpoint used", () => {
      const answered = { ...ids, containerId: 'c1', checkpointId: '' };
      expect(boundEvents('r1', 's1', placedDecision, answered)).to.deep.equal([
        { type: 'CallBound', requestId: 'r1', containerId: 'c1', checkpointId: null },
        {
          type: 'SessionPinned',
          sessionId: 's1',
          workerId: 'w1',
          containerId: 'c1',
          requestId: 'r1',
          checkpointId: null,
        },
      ]);
      expect(boundEvents('r1', null, placedDecision, answered)).to.have.length(1);
      const reused = { ...placedDecision, containerId: 'c1' };
      expect(boundEvents('r1', 's1', reused, answered), 'a reused container').to.have.length(1);
    });

    it("answers carry the router's request, session and worker, the worker's container", () => {
      const fromWorker = {
        requestId: 'x',
        sessionId: '',
        workerId: 'y',
        containerId: 'c1',
        checkpointId: 'k',
        version: 'ignored',
        routingRevision: 9,
      };
      expect(answerIds(ids, fromWorker)).to.deep.equal({
        ...ids,
        containerId: 'c1',
        checkpointId: 'k',
      });
      expect(answerIds({ ...ids, containerId: 'c0' }, undefined)).to.include({ containerId: 'c0' });
    });

    it("passes the worker's codes through, except a refusal of the router's credentials", () => {
      expect(workerEnding('w1', 0, 'OK')).to.deep.equal({
        code: null,
        details: 'OK',
        raised: null,
        inputsRaised: null,
      });
      expect(workerEnding('w1', 9, 'pip failed', { 'readie-not-started': '1' })).to.deep.equal({
        code: 'FAILED_PRECONDITION',
        details: 'worker w1: pip failed',
        trailers: { 'readie-not-started': '1' },
      });
      expect(workerEnding('w1', 16, 'bad token').code).to.equal('INTERNAL');
      expect(workerEnding('w1', 99, '?').code).to.equal('UNKNOWN');
    });

    it('an OK ending whose worker says the function raised: CallFinished names it, bounded, whatever the worker sent', () => {
      const trailers = raisedTrailers({ type: 'pkg.Error', message: 'bad ünïcode 😀' });
      const ending = workerEnding('w1', 0, 'OK', trailers);
      expect(ending.raised).to.deep.equal({ type: 'pkg.Error', message: 'bad ünïcode 😀' });
      const given = history(registered('w1'), placed('r1', 'w1'));
      const finished = decideCallEnd(given.state(), {
        requestId: 'r1',
        code: null,
        raised: ending.raised ?? null,
      });
      expect(finished.events).to.deep.equal([
        {
          type: 'CallFinished',
          requestId: 'r1',
          ok: true,
          code: null,
          message: null,
          raised: { type: 'pkg.Error', message: 'bad ünïcode 😀' },
          inputsRaised: null,
        },
      ]);
      // A hostile worker: malformed percent-encoding, line breaks, a lone surrogate, no bounds.
      expect(raisedOfTrailers({ 'readie-raised': '%E0%A4%A' })).to.equal(null);
      const hostile = raisedOfTrailers({
        'readie-raised': encodeURIComponent('Bad Type\n'),
        'readie-raised-message': encodeURIComponent(`one\r\nforged line ${'x'.repeat(5000)}`),
      });
      expect(hostile?.type).to.equal('BadType');
      expect(hostile?.message).to.match(/^one forged line x+\.\.\. \(cut\)$/);
      expect(hostile?.message).to.have.length(MAX_RAISED_MESSAGE_LENGTH);
      expect(boundedRaised({ type: 'E', message: 'a\ud800b' }).message).to.equal('a\ufffdb');
      // A failed call never says it raised; the router never relays these trailers to the client.
      expect(workerEnding('w1', 14, 'gone', trailers)).to.not.have.property('raised');
      expect(workerEnding('w1', 14, 'gone', trailers).trailers).to.deep.equal({});
      expect(
        callFinishedEvents(given.state(), 'r1', 'UNAVAILABLE', 'gone', ending.raised ?? null)[0],
      ).to.include({ raised: null });
    });

    it("an OK batch's ending: CallFinished says how many of its inputs raised, as a worker may say it", () => {
      const ending = workerEnding('w1', 0, 'OK', inputsRaisedTrailers(3));
      expect(ending).to.include({ code: null, inputsRaised: 3, raised: null });
      const given = history(registered('w1'), placed('r1', 'w1'));
      const [finished] = decideCallEnd(given.state(), {
        requestId: 'r1',
        code: null,
        inputsRaised: ending.inputsRaised ?? null,
      }).events;
      expect(finished).to.include({ type: 'CallFinished', ok: true, inputsRaised: 3 });
      // Nothing a batch could have is nothing: not a count, negative, past the most inputs.
      for (const text of ['', '-1', '1.5', '0x10', '1025', '99999', ' 3']) {
        expect(inputsRaisedOfTrailers({ 'readie-inputs-raised': text }), text).to.equal(null);
      }
      expect(inputsRaisedOfTrailers({ 'readie-inputs-raised': '1024' })).to.equal(1024);
      expect(inputsRaisedOfTrailers({})).to.equal(null);
      // A failed call says none, whatever its worker sent.
      const failed = workerEnding('w1', 14, 'gone', inputsRaisedTrailers(3));
      expect(failed).to.not.have.property('inputsRaised');
      expect(callFinishedEvents(given.state(), 'r1', 'UNAVAILABLE', 'gone', null, 3)[0]).to.include(
        { inputsRaised: null },
      );
    });

    it('a client leaving at its deadline is DEADLINE_EXCEEDED, earlier CANCELLED', () => {
      expect(departureOf(10_000, 10_100).code).to.equal('DEADLINE_EXCEEDED');
      expect(departureOf(10_000, 20_000).code).to.equal('CANCELLED');
      expect(departureOf(10_000, Infinity).code).to.equal('CANCELLED');
    });
  });

  describe('session turn queue', () => {
    it('grants one turn per session and passes it on in arrival order', () => {
      const queue = new TurnQueue<string>();
      expect(queue.request('s', 'a')).to.equal(true);
      expect(queue.request('s', 'b')).to.equal(false);
      expect(queue.request('s', 'c')).to.equal(false);
      expect(queue.request('t', 'x'), 'another session is independent').to.equal(true);
      expect(queue.waiting('s')).to.equal(2);
      expect(queue.release('s', 'b'), 'only the holder releases').to.equal(undefined);
      expect(queue.release('s', 'a')).to.equal('b');
      expect(queue.withdraw('s', 'c')).to.equal(true);
      expect(queue.release('s', 'b')).to.equal(undefined);
      expect(queue.holder('s')).to.equal(undefined);
      expect(queue.request('s', 'd')).to.equal(true);
    });
  });
});
