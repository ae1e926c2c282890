/**
 * Never fits vs not now (docs/placement.md): given a cluster, when a call finds no room, then
 * placement says whether any ready worker could ever take it, naming the largest offer when none
 * could; a log recorded under rules before the admission rules is decided with the old words.
 */
import { expect } from 'chai';
import { place, type RejectedDecision } from '../../src/core/placement/index.js';
import { demand, GiB, history, registered, started, utilization } from '../support/events.js';
import type { Demand, NewEvent } from '../../src/events/index.js';

function decide(events: NewEvent[], fields: Partial<Demand>): RejectedDecision {
  const decision = place(history(...events).state(), {
    requestId: 'r',
    sessionId: null,
    demand: demand(fields),
  });
  expect(decision.outcome, JSON.stringify(decision)).to.equal('rejected');
  return decision as RejectedDecision;
}

describe('never fits vs not now', () => {
  it('refuses a budget above every worker, naming the largest offer (the headroom of its total)', () => {
    const given = [started(), registered('w1', { memoryTotal: 12 * GiB }), registered('w2')];
    const refusal = decide(given, { memory: 100 * GiB });
    expect(refusal.code).to.equal('RESOURCE_EXHAUSTED');
    expect(refusal.fit).to.equal('never');
    // w2's 16 GiB at 90%: 14.4 GiB.
    expect(refusal.message).to.equal(
      'no worker can ever accept this request: the largest worker offers 14.40GiB of memory; ' +
        'this call asks 100GiB (ask for less, or add a larger worker)',
    );
    expect(refusal.events.at(-1)).to.deep.include({
      type: 'CallRejected',
      message: refusal.message,
    });
  });

  it('a budget an empty worker could take but a busy one cannot now is "not now", in the old words', () => {
    const given = [started(), registered('w1'), utilization('w1', { memoryUsed: 14 * GiB })];
    const refusal = decide(given, { memory: 2 * GiB });
    expect(refusal.fit).to.equal('not-now');
    expect(refusal.message).to.equal(
      'no worker can accept this request (1 candidate: memory-headroom ruled out 1)',
    );
  });

  it('a GPU call with no gpu worker never fits; a GPU budget above every gpu worker names its GPU offer', () => {
    const cpuOnly = [started(), registered('c1'), registered('c2')];
    expect(decide(cpuOnly, { gpu: true }).message).to.equal(
      'no worker can ever accept this request: it is a GPU call and none of the 2 ready workers is a gpu worker',
    );
    const gpu = [...cpuOnly, registered('g1', { flavor: 'gpu', gpuMemoryTotal: 10 * GiB })];
    const refusal = decide(gpu, { gpuMemory: 20 * GiB });
    expect(refusal.fit).to.equal('never');
    expect(refusal.message).to.contain(
      'the largest gpu worker offers 9GiB of GPU memory; this call asks 20GiB',
    );
  });

  it('memory on one worker and GPU memory on another: no single worker offers both', () => {
    const given = [
      started(),
      registered('big', { flavor: 'gpu', memoryTotal: 64 * GiB, gpuMemoryTotal: 8 * GiB }),
      registered('gpu', { flavor: 'gpu', memoryTotal: 8 * GiB, gpuMemoryTotal: 80 * GiB }),
    ];
    const refusal = decide(given, { memory: 32 * GiB, gpuMemory: 40 * GiB });
    expect(refusal.fit).to.equal('never');
    expect(refusal.message).to.contain(
      'no single gpu worker offers both 32GiB of memory and 40GiB of GPU memory',
    );
  });

  it('a worker that reported no memory total might take any budget: not "never"', () => {
    const given = [
      started(),
      registered('w1', { memoryTotal: 12 * GiB }),
      registered('unknown', { memoryTotal: null, maxContainers: 1 }),
      utilization('unknown', { containerCount: 1 }),
    ];
    expect(decide(given, { memory: 100 * GiB }).fit).to.equal('not-now');
  });

  it('workers that are not candidates (error, leaving) do not count as offers', () => {
    const given = [
      started(),
      registered('small', { memoryTotal: 4 * GiB }),
      registered('broken', { status: 'error', error: 'no python', memoryTotal: 256 * GiB }),
    ];
    expect(decide(given, { memory: 100 * GiB }).fit).to.equal('never');
  });

  it('a log recorded under rules before 5 (or none) is refused in the words it had', () => {
    for (const rules of [4, null]) {
      const given = [started({}, rules), registered('w1', { memoryTotal: 12 * GiB })];
      const refusal = decide(given, { memory: 100 * GiB });
      expect(refusal.fit).to.equal(undefined);
      expect(refusal.message).to.equal(
        'no worker can accept this request (1 candidate: memory-headroom ruled out 1)',
      );
    }
  });
});
