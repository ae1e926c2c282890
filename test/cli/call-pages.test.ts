/** `readie calls` and `readie call` pages of calls the admission queue held (call-pages.ts). */
import { expect } from 'chai';
import { renderCall, renderCallList } from '../../src/cli/calls/call-pages.js';
import { CallView } from '../../src/proto/gen/readie/v1/history.js';

const NOW = Date.parse('2026-12-05T12:00:00.000Z');
const at = (seconds: number) => new Date(NOW - 60_000 + seconds * 1000).toISOString();

const waiting = CallView.fromPartial({
  requestId: 'r-wait',
  tenantId: 'acme',
  function: 'jobs.score',
  state: 'queued',
  requestedAt: at(0),
  queuedAt: at(0),
  queuedWhy: "tenant acme holds its quota's 1 slots (max-slots) \u001b[31m",
  requestedSeq: 7,
});
const admitted = CallView.fromPartial({
  requestId: 'r-done',
  tenantId: 'acme',
  function: 'jobs.score',
  state: 'succeeded',
  code: 'OK',
  requestedAt: at(0),
  queuedAt: at(0),
  queuedWhy: "tenant acme holds its quota's 1 slots (max-slots)",
  admittedAt: at(40),
  queueWaitMs: 40_000,
  boundAt: at(41),
  finishedAt: at(44),
  durationMs: 44_000,
  workerId: 'w1',
  containerId: 'c1',
  attempts: [{ workerId: 'w1', placedAt: at(40) }],
  requestedSeq: 8,
});
const left = CallView.fromPartial({
  requestId: 'r-left',
  state: 'rejected',
  code: 'DEADLINE_EXCEEDED',
  message: "left the queue after 5.0s (its client's deadline passed): deadline exceeded",
  requestedAt: at(0),
  queuedAt: at(0),
  queueWaitMs: 5000,
  finishedAt: at(5),
  durationMs: 5000,
  requestedSeq: 9,
});

describe('the calls pages: calls the admission queue held', () => {
  it('readie calls shows how long each waited, so far for one still waiting, nothing for one that never did', () => {
    const never = CallView.fromPartial({
      requestId: 'r-never',
      state: 'placed',
      requestedAt: at(59),
    });
    const page = renderCallList([waiting, admitted, left, never], undefined, NOW);
    const row = (id: string) => page.split('\n').find((line) => line.includes(id)) ?? '';
    expect(page).to.contain('QUEUED');
    expect(row('r-wait')).to.match(/queued .*1m 0s…/);
    expect(row('r-done')).to.contain('40s');
    expect(row('r-left')).to.match(/rejected .*DEADLINE_EXCEEDED.*5\.0s/);
    expect(row('r-never')).not.to.contain('…');
  });

  it('readie call shows queued (why, escaped), admitted after the wait, then placed; one still waiting says so', () => {
    const page = renderCall(admitted);
    expect(page).to.contain("  queued     40s: tenant acme holds its quota's 1 slots (max-slots)");
    const steps = page
      .slice(page.indexOf('steps'))
      .split('\n')
      .map((line) => line.trim().split(/\s+/)[0]);
    expect(steps.filter(Boolean)).to.deep.equal([
      'steps',
      'requested',
      'queued',
      'admitted',
      'placed',
      'bound',
      'finished',
    ]);
    expect(page).to.match(/admitted +\S+ +\+40s +after 40s in the queue/);
    const still = renderCall(waiting);
    expect(still).to.contain('  queued     waiting: tenant acme');
    expect(still).to.contain('\\x1b[31m');
    expect(still).not.to.contain('\u001b');
  });

  it('a batch of a map shows its inputs in readie calls (INPUTS) and readie call; a plain call none', () => {
    const batch = CallView.fromPartial({ ...admitted, requestId: 'r-batch', inputs: 25 });
    const page = renderCallList([batch, admitted], undefined, NOW);
    const header = page.split('\n')[1] ?? '';
    const row = (id: string) => page.split('\n').find((line) => line.includes(id)) ?? '';
    const column = header.indexOf('INPUTS');
    expect(column).to.be.above(0);
    expect(row('r-batch').slice(column).trimStart()).to.match(/^25 /);
    expect(
      row('r-done')
        .slice(column, column + 6)
        .trim(),
    ).to.equal('');
    expect(renderCall(batch)).to.contain('  inputs     25 (a batch of a map)');
    expect(renderCall(admitted)).not.to.contain('inputs');
    // Some of its inputs raised: how many, in both.
    const raising = CallView.fromPartial({ ...batch, inputsRaised: 2 });
    const listed = renderCallList([raising], undefined, NOW);
    expect(listed).to.match(/r-batch.*succeeded\W+25, 2 raised\W+OK/);
    expect(renderCall(raising)).to.contain('  inputs     25, 2 raised (a batch of a map)');
  });

  it('readie call ends a call that left the queue with a "left queue" step, its code and message', () => {
    const page = renderCall(left);
    expect(page).to.match(
      /left queue +\S+ +\+5\.0s +DEADLINE_EXCEEDED: left the queue after 5\.0s \(its client's deadline passed\)/,
    );
    expect(page).not.to.contain('refused');
  });
});
