/**
 * When admission is decided again, given / when / then: given a worker's record and a call
 * waiting, when a load report arrives, then it opens room only if it frees memory, GPU memory or
 * container slots (with nothing waiting it is not worked out); and the admitter is asked only
 * after decisions whose events can open room.
 */
import { expect } from 'chai';
import { mayAdmitAfter } from '../../src/core/admission/index.js';
import { decide } from '../../src/core/decisions.js';
import type { ClusterState } from '../../src/projections/index.js';
import {
  container,
  demand,
  finished,
  GiB,
  history,
  type History,
  registered,
  started,
  utilization,
} from '../support/events.js';

function report(state: ClusterState, fields: Record<string, unknown>) {
  return decide('utilizationReport', state, {
    workerId: 'w1',
    memoryUsed: 4 * GiB,
    containerCount: 2,
    cpuUsed: null,
    cpuTotal: null,
    gpuMemoryUsed: null,
    instanceId: null,
    containers: null,
    reportSeq: null,
    ...fields,
  });
}

/**
 * `given` with a call waiting in the queue: calls of 14 GiB (of a 16 GiB worker) until one waits
 * (on a worker that reported no load yet, the first is placed and holds the memory).
 */
function waiting(given: History): History {
  for (let n = 0; n < 2 && given.state().queue.size === 0; n += 1) {
    const call = decide('call', given.state(), {
      call: {
        requestId: `call-${n}`,
        sessionId: null,
        tenantId: null,
        demand: demand({ memory: 14 * GiB }),
      },
    });
    given.add(...call.events);
  }
  expect(given.state().queue.size, 'a call waits').to.equal(1);
  return given;
}

describe('admission: when to decide again', () => {
  const given = waiting(
    history(
      started({ QUEUE_TIMEOUT: 600_000 }),
      registered('w1'),
      utilization('w1', { memoryUsed: 4 * GiB, containerCount: 2 }),
    ),
  );

  it('with nothing waiting, a load report that frees memory is not worked out', () => {
    const idle = history(
      started({ QUEUE_TIMEOUT: 600_000 }),
      registered('w1'),
      utilization('w1', { memoryUsed: 4 * GiB, containerCount: 2 }),
    );
    expect(report(idle.state(), { memoryUsed: GiB }).opensRoom).to.equal(false);
  });

  it('a load report that frees nothing opens no room, and admission is not asked', () => {
    const same = report(given.state(), {});
    expect(same.opensRoom).to.equal(false);
    expect(mayAdmitAfter(same)).to.equal(false);
    const more = report(given.state(), { memoryUsed: 5 * GiB, containerCount: 3 });
    expect(more.opensRoom).to.equal(false);
  });

  it('a load report with less memory in use, or fewer containers counted, opens room', () => {
    for (const fields of [{ memoryUsed: 3 * GiB }, { containerCount: 1 }]) {
      const freed = report(given.state(), fields);
      expect(freed.opensRoom, JSON.stringify(fields)).to.equal(true);
      expect(mayAdmitAfter(freed)).to.equal(true);
    }
  });

  it('a full report that drops an idle container opens room; one listing the same containers does not', () => {
    const full = waiting(
      history(
        started({ QUEUE_TIMEOUT: 600_000 }),
        registered('w1', { maxContainers: 2 }),
        utilization('w1', { memoryUsed: GiB }),
        container('w1', 'c1', 'ready'),
        container('w1', 'c2', 'ready'),
      ),
    );
    const listed = [
      { containerId: 'c1', state: 'ready' as const, checkpointId: null },
      { containerId: 'c2', state: 'ready' as const, checkpointId: null },
    ];
    const same = report(full.state(), { memoryUsed: GiB, containers: listed, reportSeq: 1 });
    expect(same.opensRoom).to.equal(false);
    const dropped = report(full.state(), {
      memoryUsed: GiB,
      containers: listed.slice(0, 1),
      reportSeq: 1,
    });
    expect(dropped.opensRoom).to.equal(true);
  });

  it('a first report, a call ending or a container removed asks admission; a container ready does not', () => {
    const first = report(
      waiting(history(started({ QUEUE_TIMEOUT: 600_000 }), registered('w1'))).state(),
      { memoryUsed: 4 * GiB },
    );
    expect(first.opensRoom).to.equal(true);
    const end = { cause: { kind: 'reaper' } as const, events: [] };
    expect(mayAdmitAfter(end)).to.equal(false);
    expect(
      mayAdmitAfter({
        ...end,
        events: [finished('r')],
      }),
    ).to.equal(true);
    for (const [state, asks] of [
      ['removed', true],
      ['busy', true],
      ['ready', false],
    ] as const) {
      expect(mayAdmitAfter({ ...end, events: [container('w1', 'c1', state)] }), state).to.equal(
        asks,
      );
    }
  });
});
