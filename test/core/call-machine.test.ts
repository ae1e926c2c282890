import { expect } from 'chai';
import { raisedTrailers } from '../../src/shared/raised.js';
import type { TrailerEntry } from '../../src/core/calls/answer-trailers.js';
import type { CallEffect } from '../../src/core/calls/call-effects.js';
import { newCall, stepCall } from '../../src/core/calls/call-machine.js';
import type { CallInput, CallPhase, CallWorld } from '../../src/core/calls/call-phases.js';
import { PlacementCaches } from '../../src/core/placement/index.js';
import { causeText, type NewEvent } from '../../src/events/index.js';
import { applyInPlace, initialState, type ClusterState } from '../../src/projections/index.js';
import { PayloadFormat, type CallIds } from '../../src/proto/gen/readie/v1/call.js';
import type { CallConfig } from '../../src/proto/gen/readie/v1/proxy.js';
import { DEFAULT_CONFIG } from '../../src/shared/config.js';
import { atOf, GiB, placed, registered, START_MS } from '../support/events.js';

/** A call config as a client sends it first. */
function config(fields: Partial<CallConfig> = {}): CallConfig {
  return {
    requestId: 'r1',
    sessionId: '',
    imports: [],
    memory: undefined,
    gpuMemory: undefined,
    gpu: false,
    disableOptimizedExecution: false,
    packages: [],
    checkpointId: '',
    pythonVersion: '3.11.2',
    format: PayloadFormat.PAYLOAD_FORMAT_JSON_CALL,
    pinned: false,
    retryOf: '',
    function: '',
    ...fields,
  };
}

const chunk = (bytes: number): CallInput => ({
  type: 'client-message',
  message: { kind: 'chunk', bytes, wire: Buffer.alloc(bytes) },
});

const answer = (ids: Partial<CallIds> | undefined): CallInput => ({
  type: 'worker-answer',
  answer: {
    ids: ids && {
      requestId: 'r1',
      sessionId: '',
      workerId: 'w1',
      containerId: '',
      checkpointId: '',
      version: '',
      routingRevision: 0,
      ...ids,
    },
    carries: 'log',
    chunkBytes: 0,
    wire: Buffer.alloc(0),
    body: Buffer.alloc(0),
  },
});

/**
 * A call driven as the shell drives it: given the cluster's events, when inputs arrive, then the
 * effects. Records are folded into the state, as the router's journal does.
 */
class Given {
  private state: ClusterState = initialState();
  private seq = 0;
  readonly caches = new PlacementCaches();
  phase: CallPhase;
  now = START_MS;
  readonly handling = new Set<string>();
  readonly recorded: NewEvent[] = [];
  /** Workers the shell cannot connect to: their dials fail; every other one connects. */
  readonly unreachable = new Set<string>();
  /** Leave dials unanswered (the test answers them). */
  manualDial = false;

  constructor(events: readonly NewEvent[], clientDeadline = Infinity) {
    for (const event of events) this.fold(event, null);
    this.phase = newCall(clientDeadline);
  }

  private fold(event: NewEvent, cause: string | null): void {
    this.seq += 1;
    const stamped = { seq: this.seq, at: atOf(this.seq), cause, ...event };
    this.state = applyInPlace(this.state, stamped, this.caches);
  }

  private world(): CallWorld {
    return {
      state: this.state,
      caches: this.caches,
      now: this.now,
      settings: { ...DEFAULT_CONFIG, EXECUTION_TIMEOUT: 60_000, SESSION_WAIT_TIMEOUT: 5_000 },
      handling: (requestId) => this.handling.has(requestId),
    };
  }

  /** Feeds one input; performs records (and answers a decision's record) like the shell. */
  when(input: CallInput): CallEffect[] {
    const step = stepCall(this.phase, input, this.world());
    this.phase = step.phase;
    const effects = [...step.effects];
    for (const effect of step.effects) {
      if (effect.type === 'record' || effect.type === 'record-decision') {
        for (const event of effect.decision.events) {
          this.fold(event, causeText(effect.decision.cause));
          this.recorded.push(event);
        }
      }
      if (effect.type === 'record-decision') effects.push(...this.when({ type: 'recorded' }));
      if (effect.type === 'dial-worker' && !this.manualDial) {
        effects.push(
          ...this.when(
            this.unreachable.has(effect.workerId)
              ? { type: 'dial-failed', error: `connect ECONNREFUSED ${effect.address}` }
              : { type: 'worker-dialed' },
          ),
        );
      }
    }
    return effects;
  }

  config(fields: Partial<CallConfig> = {}): CallEffect[] {
    return this.when({
      type: 'client-message',
      message: { kind: 'config', config: config(fields) },
    });
  }
}

const types = (effects: readonly CallEffect[]) => effects.map((effect) => effect.type);
/** Trailer entries as a record (text values). */
const asRecord = (entries: readonly TrailerEntry[] | undefined) =>
  Object.fromEntries((entries ?? []).map(({ key, value }) => [key, String(value)]));
/** What the trailers say about the function: all but the call's IDs (every answer has those). */
const aboutFunction = (entries: readonly TrailerEntry[] | undefined) =>
  Object.fromEntries(
    Object.entries(asRecord(entries)).filter(
      ([key]) =>
        !/^readie-(request|session|worker|container|checkpoint)-id$|^readie-(version|routing-revision)$/.test(
          key,
        ),
    ),
  );
const find = <T extends CallEffect['type']>(effects: readonly CallEffect[], type: T) =>
  effects.find((effect): effect is Extract<CallEffect, { type: T }> => effect.type === type);

describe('the call state machine (pure)', () => {
  it('records the decision, then opens the worker with the header and the tighter deadline', () => {
    const given = new Given([registered('w1')], START_MS + 30_000);
    const effects = given.config({ memory: 2 * GiB, packages: ['numpy'] });
    expect(types(effects)).to.deep.equal([
      'pause-client',
      'identified',
      'register',
      'explain',
      'record-decision',
      'placed',
      'dial-worker',
      'open-worker',
      'resume-client',
    ]);
    expect(given.recorded.map((e) => e.type)).to.deep.equal(['CallRequested', 'CallPlaced']);
    // What the client's deadline leaves as the call is requested, recorded for placement.
    expect(given.recorded[0]).to.deep.include({ deadlineMs: 30_000 });
    const decision = find(effects, 'record-decision')!.decision;
    expect(decision.cause).to.deep.equal({ kind: 'call', requestId: 'r1' });
    const open = find(effects, 'open-worker')!;
    expect(open).to.deep.include({ workerId: 'w1', address: 'w1.local:50052' });
    expect(open.deadline, 'the client deadline is tighter than EXECUTION_TIMEOUT').to.equal(
      START_MS + 30_000,
    );
    expect(open.header).to.deep.include({ memory: 2 * GiB, packages: ['numpy'], gpu: false });
    expect(given.phase.phase).to.equal('relaying');
  });

  it('records no deadline for a client that set none, and what is left of one in whole ms (never below 0)', () => {
    const none = new Given([registered('w1')]);
    none.config({});
    expect(none.recorded[0]).to.deep.include({ type: 'CallRequested', deadlineMs: null });
    const late = new Given([registered('w1')], START_MS + 10_000);
    late.now = START_MS + 9_999.6;
    late.config({});
    expect(late.recorded[0]).to.deep.include({ deadlineMs: 0 });
  });

  it('makes a session call wait for its turn, and places it when granted', () => {
    const given = new Given([registered('w1')]);
    const effects = given.config({ sessionId: 's1' });
    expect(find(effects, 'wait-turn')).to.deep.equal({
      type: 'wait-turn',
      sessionId: 's1',
      tenantId: null,
      timeoutMs: 5_000,
    });
    expect(given.phase.phase).to.equal('waiting-turn');
    expect(given.recorded, 'nothing recorded before the turn').to.deep.equal([]);
    expect(types(given.when({ type: 'turn-granted' }))).to.include('open-worker');
  });

  it('refuses a request ID in flight here or holding a reservation, without registering it', () => {
    const busy = new Given([registered('w1')]);
    busy.handling.add('r1');
    const here = busy.config();
    expect(types(here)).to.not.include('register');
    expect(find(here, 'fail-client')).to.deep.include({ code: 'ALREADY_EXISTS' });
    const reserved = new Given([registered('w1'), placed('r1', 'w1')]);
    expect(find(reserved.config(), 'fail-client')).to.deep.include({ code: 'ALREADY_EXISTS' });
    expect(reserved.recorded).to.deep.equal([]);
  });

  it('refuses a stream that does not start with a config, and one that ends before it', () => {
    const first = new Given([registered('w1')]);
    expect(find(first.when(chunk(3)), 'fail-client')).to.deep.include({
      code: 'INVALID_ARGUMENT',
      details: 'payload before config: the first message must carry the call config, not a chunk',
    });
    const ended = new Given([registered('w1')]);
    expect(find(ended.when({ type: 'client-ended' }), 'fail-client')).to.deep.include({
      code: 'INVALID_ARGUMENT',
      details: 'the stream ended before any config message',
    });
  });

  it('refuses a config a field of which is outside its bound, recording nothing and naming the field', () => {
    const cases: [Partial<CallConfig>, RegExp][] = [
      [{ requestId: 'r1\nforged' }, /^request_id holds U\+000A at character 3/],
      [{ sessionId: 's\x1b[2J' }, /^session_id holds U\+001B/],
      [{ checkpointId: 'c'.repeat(257) }, /^checkpoint_id is 257 characters long/],
      [
        { imports: Array.from({ length: 65 }, (_, i) => `m${i}`) },
        /^imports carries 65 import hints: a call carries at most 64$/,
      ],
      [{ packages: ['numpy\u202e'] }, /^packages\[0\] holds U\+202E/],
    ];
    for (const [fields, details] of cases) {
      const given = new Given([registered('w1')]);
      const effects = given.config(fields);
      expect(types(effects), JSON.stringify(fields)).to.not.include('record-decision');
      expect(types(effects)).to.not.include('register');
      const refusal = find(effects, 'fail-client');
      expect(refusal?.code).to.equal('INVALID_ARGUMENT');
      expect(refusal?.details).to.match(details);
      expect(given.recorded).to.deep.equal([]);
    }
  });

  it("refuses with placement's code, gives the turn back and records no CallFinished", () => {
    const given = new Given([]);
    const effects = given.config({ sessionId: 's1' });
    const granted = given.when({ type: 'turn-granted' });
    expect(types(effects)).to.include('wait-turn');
    expect(types(granted)).to.include.members(['release-turn', 'unregister', 'refused']);
    expect(find(granted, 'fail-client')).to.deep.equal({
      type: 'fail-client',
      code: 'UNAVAILABLE',
      details: 'no workers available',
      trailers: [
        { key: 'readie-request-id', value: 'r1' },
        { key: 'readie-session-id', value: 's1' },
        { key: 'readie-not-started', value: '1' },
      ],
    });
    expect(given.recorded.map((e) => e.type)).to.deep.equal(['CallRequested', 'CallRejected']);
  });

  it("binds on the first answer naming the container and pins a session's new container", () => {
    const given = new Given([registered('w1')]);
    given.config({ sessionId: 's1' });
    given.when({ type: 'turn-granted' });
    expect(types(given.when(answer({ sessionId: 's1' })))).to.deep.equal(['to-client']);
    const first = given.when(answer({ sessionId: 's1', containerId: 'c1' }));
    expect(types(first)).to.deep.equal(['record', 'bound', 'to-client']);
    expect(find(first, 'record')!.decision.cause).to.deep.equal({
      kind: 'answer',
      requestId: 'r1',
    });
    expect(given.recorded.slice(-2).map((e) => e.type)).to.deep.equal([
      'CallBound',
      'SessionPinned',
    ]);
    expect(types(given.when(answer({ sessionId: 's1', containerId: 'c1' })))).to.deep.equal([
      'to-client',
    ]);
    const ended = given.when({ type: 'worker-ended', code: 0, details: 'OK', trailers: {} });
    expect(find(ended, 'end-client'), 'the new pin must be durable first').to.deep.include({
      type: 'end-client',
      afterCommit: true,
    });
    expect(find(ended, 'end-client')?.trailers).to.deep.include({
      key: 'readie-container-id',
      value: 'c1',
    });
    expect(given.recorded.at(-1)).to.deep.include({ type: 'CallFinished', ok: true });
  });

  it('relays chunks, ends a malformed stream INVALID_ARGUMENT, and finishes exactly once', () => {
    const given = new Given([registered('w1')]);
    given.config();
    expect(given.when(chunk(10))).to.deep.include({
      type: 'send-chunk',
      wire: Buffer.alloc(10),
      bytes: 10,
    });
    const second = given.when({
      type: 'client-message',
      message: { kind: 'config', config: config() },
    });
    expect(find(second, 'fail-client')).to.deep.include({ code: 'INVALID_ARGUMENT' });
    expect(
      types(given.when({ type: 'worker-ended', code: 14, details: 'gone', trailers: {} })),
    ).to.deep.equal([]);
    expect(given.recorded.filter((e) => e.type === 'CallFinished')).to.deep.equal([
      {
        type: 'CallFinished',
        requestId: 'r1',
        ok: false,
        code: 'INVALID_ARGUMENT',
        // The words the client was told, kept for the call history.
        message: 'a second config: only the first message may carry the config',
        raised: null,
        inputsRaised: null,
      },
    ]);
  });

  it('given a worker ending OK with what the function raised, then CallFinished records it and the client hears only OK', () => {
    const given = new Given([registered('w1')]);
    given.config();
    given.when(answer({ containerId: 'c1' }));
    const ended = given.when({
      type: 'worker-ended',
      code: 0,
      details: 'OK',
      trailers: raisedTrailers({ type: 'ValueError', message: 'bad input' }),
    });
    expect(given.recorded.at(-1)).to.deep.include({
      type: 'CallFinished',
      ok: true,
      code: null,
      raised: { type: 'ValueError', message: 'bad input' },
    });
    const keys = find(ended, 'end-client')?.trailers.map((entry) => entry.key) ?? [];
    expect(keys).to.include('readie-request-id').and.not.include('readie-raised');
    expect(find(ended, 'finished')).to.deep.include({
      code: null,
      raised: { type: 'ValueError', message: 'bad input' },
    });
  });

  it('counts a departure at the deadline as DEADLINE_EXCEEDED and tells the gone client nothing', () => {
    const given = new Given([registered('w1')], START_MS + 1_000);
    given.config();
    given.now = START_MS + 900;
    const effects = given.when({ type: 'client-gone' });
    expect(types(effects)).to.not.include.members(['fail-client', 'end-client']);
    expect(given.recorded.at(-1)).to.deep.include({
      type: 'CallFinished',
      code: 'DEADLINE_EXCEEDED',
    });
  });

  it("turns a worker's refusal of the router's credentials into INTERNAL", () => {
    const given = new Given([registered('w1')]);
    given.config();
    const effects = given.when({ type: 'worker-ended', code: 7, details: 'no', trailers: {} });
    expect(find(effects, 'fail-client')?.code).to.equal('INTERNAL');
  });

  it('marks every refusal before placement not started, and a malformed stream mid-payload too', () => {
    const none = new Given([]);
    const unplaced = find(none.config(), 'fail-client');
    expect(unplaced?.code).to.equal('UNAVAILABLE');
    expect(aboutFunction(unplaced?.trailers)).to.deep.equal({ 'readie-not-started': '1' });
    const undecodable = new Given([registered('w1')]);
    const refused = undecodable.when({
      type: 'client-message',
      message: { kind: 'undecodable', problem: 'could not decode the request message of X: eof' },
    });
    expect(find(refused, 'fail-client')).to.deep.include({
      type: 'fail-client',
      code: 'INVALID_ARGUMENT',
      details: 'could not decode the request message of X: eof',
    });
    expect(aboutFunction(find(refused, 'fail-client')?.trailers)).to.deep.equal({
      'readie-not-started': '1',
    });
    const midway = new Given([registered('w1')]);
    midway.config();
    const malformed = midway.when({ type: 'client-message', message: { kind: 'empty' } });
    expect(aboutFunction(find(malformed, 'fail-client')?.trailers)).to.deep.equal({
      'readie-not-started': '1',
    });
  });

  it("relays the worker's trailers about the function, and only those", () => {
    const oom = new Given([registered('w1')]);
    oom.config();
    const killed = oom.when({
      type: 'worker-ended',
      code: 8,
      details: 'the call ran out of memory: ... 512MiB ...',
      trailers: {
        'readie-killed': 'out-of-memory',
        'readie-memory-budget': '536870912',
        'readie-request-id': 'r1',
      },
    });
    expect(find(killed, 'fail-client')).to.deep.include({
      type: 'fail-client',
      code: 'RESOURCE_EXHAUSTED',
      details: 'worker w1: the call ran out of memory: ... 512MiB ...',
    });
    // The worker's trailers about the function, and the router's own IDs (never the worker's).
    expect(asRecord(find(killed, 'fail-client')?.trailers)).to.deep.equal({
      'readie-request-id': 'r1',
      'readie-worker-id': 'w1',
      'readie-killed': 'out-of-memory',
      'readie-memory-budget': '536870912',
    });
    const lost = new Given([registered('w1')]);
    lost.config();
    const ended = lost.when({ type: 'worker-ended', code: 14, details: 'gone', trailers: {} });
    expect(aboutFunction(find(ended, 'fail-client')?.trailers), 'it may have run').to.deep.equal(
      {},
    );
    const shut = new Given([registered('w1')]);
    shut.config();
    const stopped = shut.when({ type: 'shutdown', reason: 'the router is shutting down' });
    expect(aboutFunction(find(stopped, 'fail-client')?.trailers)).to.deep.equal({});
    const refusedCredentials = new Given([registered('w1')]);
    refusedCredentials.config();
    const internal = refusedCredentials.when({
      type: 'worker-ended',
      code: 16,
      details: 'wrong token',
      trailers: {},
    });
    expect(find(internal, 'fail-client')?.code).to.equal('INTERNAL');
    expect(aboutFunction(find(internal, 'fail-client')?.trailers)).to.deep.equal({
      'readie-not-started': '1',
    });
  });

  it('gives back a turn granted after the call ended, and refuses a waiting call on shutdown', () => {
    const given = new Given([registered('w1')]);
    given.config({ sessionId: 's1' });
    const shut = given.when({ type: 'shutdown', reason: 'the router is shutting down' });
    expect(types(shut)).to.include.members(['leave-line', 'release-turn', 'unregister']);
    expect(find(shut, 'fail-client')).to.deep.include({ code: 'UNAVAILABLE' });
    expect(given.when({ type: 'turn-granted' })).to.deep.equal([{ type: 'release-turn' }]);
    expect(given.recorded).to.deep.equal([]);
  });

  it('a failed dial records the attempt, its probe failure and the next placement, then connects to the next worker', () => {
    const given = new Given([registered('a'), registered('b')]);
    given.unreachable.add('a');
    const effects = given.config();
    expect(types(effects)).to.deep.equal([
      'pause-client',
      'identified',
      'register',
      'explain',
      'record-decision',
      'placed',
      'dial-worker',
      'dial-failed',
      'record-decision',
      'placed',
      'dial-worker',
      'open-worker',
      'resume-client',
    ]);
    expect(effects.filter((e) => e.type === 'dial-worker').map((e) => e.workerId)).to.deep.equal([
      'a',
      'b',
    ]);
    expect(find(effects, 'open-worker')?.workerId).to.equal('b');
    expect(given.recorded.map((e) => e.type)).to.deep.equal([
      'CallRequested',
      'CallPlaced',
      'CallDialFailed',
      'WorkerProbeFailed',
      'CallPlaced',
    ]);
    const redecided = effects.filter((e) => e.type === 'record-decision')[1];
    expect(redecided?.type === 'record-decision' && redecided.decision.cause).to.deep.equal({
      kind: 'dial',
      requestId: 'r1',
    });
  });

  it('gives up after the third failed dial: UNAVAILABLE, no CallFinished', () => {
    const given = new Given([registered('a'), registered('b'), registered('c'), registered('d')]);
    for (const id of ['a', 'b', 'c']) given.unreachable.add(id);
    const effects = given.config();
    expect(find(effects, 'fail-client')).to.deep.include({ code: 'UNAVAILABLE' });
    expect(given.recorded.filter((e) => e.type === 'CallDialFailed')).to.have.length(3);
    expect(given.recorded.some((e) => e.type === 'CallFinished')).to.equal(false);
    expect(given.recorded.at(-1)).to.deep.include({ type: 'CallRejected', code: 'UNAVAILABLE' });
  });

  it('holds what the client sends while it connects, and passes it on once connected', () => {
    const given = new Given([registered('w1')]);
    given.manualDial = true;
    expect(types(given.config())).to.include('dial-worker');
    expect(given.phase.phase).to.equal('dialing');
    expect(given.when(chunk(5)), 'nothing is sent before the stream opens').to.deep.equal([]);
    expect(given.when({ type: 'client-ended' })).to.deep.equal([]);
    expect(types(given.when({ type: 'worker-dialed' }))).to.deep.equal([
      'open-worker',
      'send-chunk',
      'half-close-worker',
      'resume-client',
    ]);
    expect(given.phase.phase).to.equal('relaying');
  });

  it('a client that leaves while the router connects ends the call with its CallFinished', () => {
    const given = new Given([registered('w1')]);
    given.manualDial = true;
    given.config();
    given.when({ type: 'client-gone' });
    expect(given.recorded.at(-1)).to.deep.include({ type: 'CallFinished', code: 'CANCELLED' });
    expect(
      given.when({ type: 'worker-dialed' }),
      'a late connection changes nothing',
    ).to.deep.equal([]);
  });
});
