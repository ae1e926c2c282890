import { expect } from 'chai';
import type { Catalogue, Demand, NewEvent } from '../../src/events/index.js';
import { fold, type ClusterState } from '../../src/projections/index.js';
import {
  explainPlacement,
  place,
  type PlacedDecision,
  type PlacementDecision,
  type RejectedDecision,
} from '../../src/core/placement/index.js';
import { DEFAULT_CONFIG } from '../../src/shared/config.js';
import {
  container,
  demand,
  finished,
  GiB,
  history,
  type History,
  pinned,
  placed,
  registered,
  utilization,
} from '../support/events.js';

const CATALOGUE: Catalogue = {
  flavors: {
    cpu: {
      coldStartCost: 900,
      basePackages: ['numpy', 'requests', 'Typing_Extensions'],
      checkpoints: [
        { id: 'checkpoint_0', modules: [], restoreCost: 60 },
        { id: 'ckpt-numpy', modules: ['numpy'], restoreCost: 90 },
        { id: 'ckpt-pandas', modules: ['numpy', 'pandas'], restoreCost: 400 },
      ],
    },
    gpu: {
      coldStartCost: 2000,
      basePackages: ['torch'],
      checkpoints: [{ id: 'ckpt-torch', modules: ['torch'], restoreCost: 300 }],
    },
  },
  importCosts: { numpy: 150, pandas: 600, torch: 2000 },
  defaultImportCost: 100,
};

const catalogueLoaded: NewEvent = { type: 'CatalogueLoaded', revision: 'r1', catalogue: CATALOGUE };

/** The call `r` with `fields` of demand, outside any session unless told. */
function call(fields: Partial<Demand> = {}, sessionId: string | null = null, requestId = 'r') {
  return { requestId, sessionId, demand: demand(fields) };
}

function decide(given: History, fields: Partial<Demand> = {}, sessionId: string | null = null) {
  return place(given.state(), call(fields, sessionId));
}

function expectPlaced(decision: PlacementDecision): PlacedDecision {
  expect(decision.outcome, JSON.stringify(decision)).to.equal('placed');
  return decision as PlacedDecision;
}

function expectRejected(
  decision: PlacementDecision,
  code: string,
  message?: string,
): RejectedDecision {
  expect(decision.outcome, JSON.stringify(decision)).to.equal('rejected');
  const rejection = decision as RejectedDecision;
  expect(rejection.code).to.equal(code);
  if (message !== undefined) expect(rejection.message).to.contain(message);
  expect(rejection.events.at(-1)).to.deep.include({
    type: 'CallRejected',
    code,
    message: rejection.message,
  });
  expect(
    rejection.events.some((e) => e.type === 'CallPlaced' || e.type === 'SessionPinned'),
  ).to.equal(false);
  return rejection;
}

/** A session `s1` pinned to container c1 on w1 by an earlier, finished call. */
function pinnedSession(checkpointId: string | null = null, extra: NewEvent[] = []): History {
  return history(
    catalogueLoaded,
    registered('w1'),
    registered('w2'),
    placed('r0', 'w1', { sessionId: 's1', checkpointId }),
    { type: 'CallBound', requestId: 'r0', containerId: 'c1', checkpointId },
    pinned('s1', 'w1', 'c1', 'r0', checkpointId),
    finished('r0'),
    ...extra,
  );
}

describe('placement', () => {
  describe('rule 1: session affinity', () => {
    it('sends a pinned session call to its container with no filtering, and re-pins it at once in a log that records no rules version (as under 10)', () => {
      // w1 is full (memory and containers) yet the session's container still gets the call.
      const given = pinnedSession('ckpt-numpy', [
        container('w1', 'c1', 'ready', 'ckpt-numpy'),
        utilization('w1', { memoryUsed: 16 * GiB }),
      ]);
      const decision = expectPlaced(decide(given, { memory: 2 * GiB }, 's1'));
      expect(decision.events).to.deep.equal([
        {
          type: 'CallPlaced',
          requestId: 'r',
          sessionId: 's1',
          workerId: 'w1',
          containerId: 'c1',
          checkpointId: 'ckpt-numpy',
          packages: [],
          skippedPackages: [],
          memory: 2 * GiB,
          version: null,
          routingRevision: null,
          coldLoad: false,
        },
        {
          type: 'SessionPinned',
          sessionId: 's1',
          workerId: 'w1',
          containerId: 'c1',
          requestId: 'r',
          checkpointId: 'ckpt-numpy',
        },
      ]);
    });

    for (const state of ['ready', 'busy'] as const) {
      it(`reuses a pinned container that is ${state}`, () => {
        const given = pinnedSession(null, [container('w1', 'c1', state)]);
        expect(expectPlaced(decide(given, {}, 's1')).containerId).to.equal('c1');
      });
    }

    it('reuses a pinned container the worker has not reported yet', () => {
      expect(expectPlaced(decide(pinnedSession(), {}, 's1')).containerId).to.equal('c1');
    });

    it('drops the pin of a container in error and places the call like a new one', () => {
      const decision = expectPlaced(
        decide(pinnedSession(null, [container('w1', 'c1', 'error')]), {}, 's1'),
      );
      expect(decision.events[0]).to.deep.equal({
        type: 'SessionUnpinned',
        sessionId: 's1',
        reason: 'container_unavailable',
      });
      expect(decision.containerId).to.equal(null);
      expect(decision.events.map((e) => e.type)).to.deep.equal(['SessionUnpinned', 'CallPlaced']);
    });

    it('drops the pin when the worker is no longer ready (leaving) and places elsewhere', () => {
      const decision = expectPlaced(
        decide(pinnedSession(null, [{ type: 'WorkerLeaving', workerId: 'w1' }]), {}, 's1'),
      );
      expect(decision.events[0]?.type).to.equal('SessionUnpinned');
      expect(decision.workerId).to.equal('w2');
    });

    it('rejects a call of an expired session with NOT_FOUND "session expired"', () => {
      const evicted = pinnedSession(null, [
        { type: 'WorkerEvicted', workerId: 'w1', reason: 'probe' },
      ]);
      expectRejected(decide(evicted, {}, 's1'), 'NOT_FOUND', 'session expired');
      const removed = pinnedSession(null, [container('w1', 'c1', 'removed')]);
      const rejection = expectRejected(decide(removed, {}, 's1'), 'NOT_FOUND', 'session expired');
      expect(rejection.message).to.contain('container_removed');
    });

    it('places a session ID never seen before like a new call, without pinning yet', () => {
      const decision = expectPlaced(decide(history(registered('w1')), {}, 'brand-new'));
      expect(decision.events.map((e) => e.type)).to.deep.equal(['CallPlaced']);
      expect(decision.events[0]).to.deep.include({ sessionId: 'brand-new', containerId: null });
    });

    it('refuses disable_optimized_execution in a session restored from a checkpoint, leaving the session alone', () => {
      const rejection = expectRejected(
        decide(pinnedSession('ckpt-numpy'), { disableOptimizedExecution: true }, 's1'),
        'FAILED_PRECONDITION',
        'disable_optimized_execution',
      );
      expect(rejection.events).to.have.length(1);
    });

    it('honours disable_optimized_execution in a session whose container started cold', () => {
      expect(
        expectPlaced(decide(pinnedSession(null), { disableOptimizedExecution: true }, 's1'))
          .containerId,
      ).to.equal('c1');
    });

    it('refuses a pinned checkpoint that differs from the session container checkpoint', () => {
      expectRejected(
        decide(pinnedSession('ckpt-numpy'), { checkpointId: 'checkpoint_0' }, 's1'),
        'FAILED_PRECONDITION',
        '"checkpoint_0"',
      );
      expectRejected(
        decide(pinnedSession(null), { checkpointId: 'ckpt-numpy' }, 's1'),
        'FAILED_PRECONDITION',
        'cold start',
      );
      expect(
        expectPlaced(decide(pinnedSession('ckpt-numpy'), { checkpointId: 'ckpt-numpy' }, 's1'))
          .containerId,
      ).to.equal('c1');
    });

    it('treats an empty session ID as no session', () => {
      expect(expectPlaced(decide(pinnedSession(), {}, '')).containerId).to.equal(null);
    });
  });

  describe('rule 2: candidates', () => {
    it('rejects with UNAVAILABLE when there are no workers', () => {
      expectRejected(decide(history()), 'UNAVAILABLE', 'no workers available');
    });

    it('never places on a worker registered with an error, leaving, evicted, or without an address', () => {
      const given = history(
        registered('a-error', { status: 'error', error: 'no python' }),
        registered('b-leaving'),
        { type: 'WorkerLeaving', workerId: 'b-leaving' },
        registered('c-evicted'),
        { type: 'WorkerEvicted', workerId: 'c-evicted', reason: 'ttl' },
        registered('d-no-address', { address: null }),
      );
      const rejection = expectRejected(decide(given), 'UNAVAILABLE', 'no workers available');
      const explained = explainPlacement(given.state(), call());
      expect(explained.workers.map((w) => [w.workerId, w.notCandidate])).to.deep.equal([
        ['a-error', 'registered with an error status: no python'],
        ['b-leaving', 'leaving: it reported removed'],
        ['c-evicted', 'evicted (ttl)'],
        ['d-no-address', 'no address reported'],
      ]);
      expect(explained.decision).to.deep.equal(rejection);
    });
  });

  describe('rule 3: filters', () => {
    it('gives a call with no memory budget DEFAULT_MEMORY and reserves it', () => {
      expect(expectPlaced(decide(history(registered('w1')))).memory).to.equal(
        DEFAULT_CONFIG.DEFAULT_MEMORY,
      );
    });

    it('flavor: a GPU call (by flag or by GPU budget) needs a gpu worker; CPU calls pass any', () => {
      const given = history(
        registered('cpu1'),
        registered('gpu1', { flavor: 'gpu', gpuMemoryTotal: 16 * GiB }),
      );
      expect(expectPlaced(decide(given, { gpu: true })).workerId).to.equal('gpu1');
      expect(expectPlaced(decide(given, { gpuMemory: GiB })).workerId).to.equal('gpu1');
      expectRejected(
        decide(history(registered('cpu1')), { gpu: true }),
        'RESOURCE_EXHAUSTED',
        'flavor ruled out 1',
      );
      expect(
        expectPlaced(decide(history(registered('gpu1', { flavor: 'gpu' })))).workerId,
      ).to.equal('gpu1');
    });

    it('memory headroom: exactly MEMORY_HEADROOM of the total passes, one byte more does not', () => {
      const worker = registered('w1', { memoryTotal: 10 * GiB });
      const at90 = history(worker, utilization('w1', { memoryUsed: 8 * GiB }));
      expectPlaced(decide(at90, { memory: GiB }));
      expectRejected(
        decide(at90, { memory: GiB + 1 }),
        'RESOURCE_EXHAUSTED',
        'no worker can accept this request',
      );
    });

    it('memory headroom counts memory reserved for calls in flight', () => {
      const given = history(
        registered('w1', { memoryTotal: 10 * GiB }),
        placed('r1', 'w1', { memory: 8 * GiB }),
      );
      expectPlaced(decide(given, { memory: GiB }));
      expectRejected(
        decide(given, { memory: 2 * GiB }),
        'RESOURCE_EXHAUSTED',
        'memory-headroom ruled out 1',
      );
    });

    it('memory headroom is skipped when the worker reported no total', () => {
      expectPlaced(
        decide(history(registered('w1', { memoryTotal: null })), { memory: 1000 * GiB }),
      );
    });

    it('honours a changed MEMORY_HEADROOM in force', () => {
      const given = history(
        {
          type: 'RouterStarted',
          config: { MEMORY_HEADROOM: 0.5 },
          version: 't',
          rulesVersion: null,
          routerId: null,
          takeoverFrom: null,
          schemaVersion: null,
        },
        registered('w1', { memoryTotal: 10 * GiB }),
        utilization('w1', { memoryUsed: 4 * GiB }),
      );
      expectPlaced(decide(given, { memory: GiB }));
      expectRejected(decide(given, { memory: GiB + 1 }), 'RESOURCE_EXHAUSTED');
    });

    it('GPU memory headroom: in use + budget within 90% of the GPU total; skipped without a GPU budget or GPU memory', () => {
      const gpu = registered('g1', { flavor: 'gpu', gpuMemoryTotal: 10 * GiB });
      const given = history(gpu, utilization('g1', { gpuMemoryUsed: 8 * GiB }));
      expectPlaced(decide(given, { gpuMemory: GiB }));
      expectRejected(
        decide(given, { gpuMemory: GiB + 1 }),
        'RESOURCE_EXHAUSTED',
        'gpu-memory-headroom ruled out 1',
      );
      expectPlaced(decide(given, { gpu: true }));
      expectPlaced(
        decide(history(registered('g2', { flavor: 'gpu', gpuMemoryTotal: null })), {
          gpuMemory: 100 * GiB,
        }),
      );
    });

    it('container count: containers held plus calls in flight must stay below the maximum', () => {
      const given = history(registered('w1', { maxContainers: 2 }), container('w1', 'c1', 'ready'));
      expectPlaced(decide(given));
      const withInFlight = given.add(placed('r1', 'w1'));
      expectRejected(decide(withInFlight), 'RESOURCE_EXHAUSTED', 'container-count ruled out 1');
      expectPlaced(
        decide(
          history(
            registered('w1', { maxContainers: null }),
            placed('r1', 'w1'),
            placed('r2', 'w1'),
          ),
        ),
      );
    });

    it('rejects with RESOURCE_EXHAUSTED when candidates exist but none passes', () => {
      const given = history(
        registered('w1', { maxContainers: 1 }),
        registered('w2', { memoryTotal: GiB }),
        placed('r1', 'w1'),
      );
      expectRejected(
        decide(given, { memory: 2 * GiB }),
        'RESOURCE_EXHAUSTED',
        'no worker can accept this request (2 candidates',
      );
    });
  });

  describe('rule 4: ranking', () => {
    it('picks the worker whose ID sorts first as text in a fresh cluster (w10 before w2)', () => {
      const given = history(registered('w2'), registered('w10'), registered('w3'));
      expect(expectPlaced(decide(given)).workerId).to.equal('w10');
    });

    it('puts a CPU call on a cpu worker before an emptier gpu worker (flavor penalty first)', () => {
      const given = history(
        registered('a-gpu', { flavor: 'gpu' }),
        registered('b-cpu'),
        utilization('b-cpu', { memoryUsed: 10 * GiB, cpuUsed: 3, cpuTotal: 4 }),
      );
      expect(expectPlaced(decide(given)).workerId).to.equal('b-cpu');
    });

    it('prefers lower memory pressure, counting reservations', () => {
      const given = history(
        registered('a'),
        registered('b'),
        placed('r1', 'a', { memory: 2 * GiB }),
        utilization('b', { memoryUsed: GiB }),
      );
      expect(expectPlaced(decide(given)).workerId).to.equal('b');
    });

    it('then lower CPU pressure', () => {
      const given = history(
        registered('a'),
        registered('b'),
        utilization('a', { cpuUsed: 3, cpuTotal: 4 }),
        utilization('b', { cpuUsed: 1, cpuTotal: 4 }),
      );
      expect(expectPlaced(decide(given)).workerId).to.equal('b');
    });

    it('then fewer calls in flight', () => {
      const given = history(
        registered('a', { memoryTotal: null }),
        registered('b', { memoryTotal: null }),
        placed('r1', 'a'),
      );
      expect(expectPlaced(decide(given)).workerId).to.equal('b');
    });

    it('is deterministic: the same inputs give the same decision', () => {
      const given = history(
        registered('w1'),
        registered('w2'),
        utilization('w1', { memoryUsed: GiB }),
      );
      expect(decide(given, { memory: GiB })).to.deep.equal(decide(given, { memory: GiB }));
    });
  });

  describe('rule 5: checkpoint', () => {
    const cluster = () =>
      history(catalogueLoaded, registered('w1'), registered('g1', { flavor: 'gpu' }));

    it('picks the cheapest checkpoint for the import hints', () => {
      expect(expectPlaced(decide(cluster())).checkpointId).to.equal('checkpoint_0');
      expect(expectPlaced(decide(cluster(), { imports: ['numpy'] })).checkpointId).to.equal(
        'ckpt-numpy',
      );
      expect(
        expectPlaced(decide(cluster(), { imports: ['numpy', 'pandas'] })).checkpointId,
      ).to.equal('ckpt-pandas');
      expect(
        expectPlaced(decide(cluster(), { gpu: true, imports: ['torch'] })).checkpointId,
      ).to.equal('ckpt-torch');
    });

    it('breaks a cost tie by the checkpoint ID that sorts first as text', () => {
      const tie: Catalogue = {
        ...CATALOGUE,
        flavors: {
          cpu: {
            coldStartCost: 900,
            basePackages: [],
            checkpoints: [
              { id: 'b', modules: [], restoreCost: 50 },
              { id: 'a', modules: [], restoreCost: 50 },
            ],
          },
        },
      };
      const given = history(
        { type: 'CatalogueLoaded', revision: 't', catalogue: tie },
        registered('w1'),
      );
      expect(expectPlaced(decide(given)).checkpointId).to.equal('a');
    });

    it('starts cold when disable_optimized_execution is set or no catalogue is loaded', () => {
      expect(
        expectPlaced(decide(cluster(), { disableOptimizedExecution: true })).checkpointId,
      ).to.equal(null);
      expect(
        expectPlaced(decide(history(registered('w1')), { imports: ['numpy'] })).checkpointId,
      ).to.equal(null);
    });

    it('accepts a pinned checkpoint only if the chosen flavor catalogue lists exactly that ID', () => {
      expect(
        expectPlaced(decide(cluster(), { checkpointId: 'ckpt-pandas' })).checkpointId,
      ).to.equal('ckpt-pandas');
      expectRejected(
        decide(cluster(), { checkpointId: 'ckpt-torch' }),
        'INVALID_ARGUMENT',
        'flavor cpu',
      );
      expectRejected(decide(cluster(), { checkpointId: 'CKPT-NUMPY' }), 'INVALID_ARGUMENT');
      expectRejected(
        decide(history(registered('w1')), { checkpointId: 'checkpoint_0' }),
        'INVALID_ARGUMENT',
        'none is loaded',
      );
    });

    it('refuses a pinned checkpoint together with disable_optimized_execution', () => {
      expectRejected(
        decide(cluster(), { checkpointId: 'checkpoint_0', disableOptimizedExecution: true }),
        'INVALID_ARGUMENT',
        'contradict',
      );
    });
  });

  describe('rule 6: packages', () => {
    const cluster = () => history(catalogueLoaded, registered('w1'));

    it('refuses an entry that is not a PEP 508 requirement, naming it', () => {
      for (const bad of [
        'numpy>=',
        'two words',
        '-r requirements.txt',
        'numpy>=not.a.version',
        '',
      ]) {
        expectRejected(
          decide(cluster(), { packages: ['tqdm', bad] }),
          'INVALID_ARGUMENT',
          `package entry "${bad}"`,
        );
      }
    });

    it('removes duplicates and base-image distributions (version ignored), keeping extras', () => {
      const decision = expectPlaced(
        decide(cluster(), {
          packages: [
            'tqdm',
            'tqdm',
            'NumPy>=1.20',
            'requests[socks]',
            'typing-extensions',
            'numpy >= 1.20',
          ],
        }),
      );
      expect(decision.packages).to.deep.equal(['tqdm', 'requests[socks]']);
      expect(decision.skippedPackages).to.deep.equal(['NumPy>=1.20', 'typing-extensions']);
      expect(decision.events[0]).to.deep.include({
        packages: ['tqdm', 'requests[socks]'],
        skippedPackages: ['NumPy>=1.20', 'typing-extensions'],
      });
    });

    it('removes nothing without a catalogue', () => {
      expect(
        expectPlaced(decide(history(registered('w1')), { packages: ['numpy', 'tqdm'] })).packages,
      ).to.deep.equal(['numpy', 'tqdm']);
    });

    it('uses the base image of the chosen worker flavor', () => {
      const given = history(catalogueLoaded, registered('g1', { flavor: 'gpu' }));
      const decision = expectPlaced(decide(given, { gpu: true, packages: ['torch', 'numpy'] }));
      expect([decision.packages, decision.skippedPackages]).to.deep.equal([['numpy'], ['torch']]);
    });
  });

  describe('rule 7: reservation', () => {
    function afterDecision(given: History, decision: PlacementDecision): ClusterState {
      return fold(given.add(...decision.events).events);
    }

    it('reserves in the same step: the very next decision sees in-flight +1 and the budget', () => {
      const given = history(
        registered('a', { memoryTotal: 10 * GiB }),
        registered('b', { memoryTotal: 10 * GiB }),
      );
      const first = expectPlaced(decide(given, { memory: 4 * GiB }));
      expect(first.workerId).to.equal('a');
      const state = afterDecision(given, first);
      expect(state.workers.get('a')).to.deep.include({ inFlight: 1, reservedMemory: 4 * GiB });
      expect(expectPlaced(place(state, call({ memory: 4 * GiB }, null, 'r2'))).workerId).to.equal(
        'b',
      );
    });

    it('reserves nothing for a rejected call', () => {
      const given = history(registered('a', { memoryTotal: GiB }));
      const before = given.state();
      const after = afterDecision(
        given,
        expectRejected(decide(given, { memory: 2 * GiB }), 'RESOURCE_EXHAUSTED'),
      );
      expect({ ...after, lastSeq: 0 }).to.deep.equal({ ...before, lastSeq: 0 });
    });

    it('a failed call that created its session pin clears it when finished', () => {
      const given = history(registered('w1'));
      const first = expectPlaced(decide(given, {}, 's1'));
      given.add(
        ...first.events,
        { type: 'CallBound', requestId: 'r', containerId: 'c9', checkpointId: null },
        pinned('s1', 'w1', 'c9', 'r'),
      );
      expect(given.state().sessions.get('s1')?.pin?.containerId).to.equal('c9');
      given.add({
        type: 'CallFinished',
        requestId: 'r',
        ok: false,
        code: 'UNAVAILABLE',
        message: null,
        raised: null,
        inputsRaised: null,
      });
      const state = given.state();
      expect(state.sessions.get('s1')?.pin).to.equal(null);
      expect(state.workers.get('w1')).to.deep.include({ inFlight: 0, reservedMemory: 0 });
    });
  });
});
