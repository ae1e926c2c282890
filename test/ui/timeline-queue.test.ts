/**
 * The dashboard's and the incident report's timeline (src/ui/assets/timeline.js) of a call the
 * admission queue held: its steps and phases, run as the page runs the script (a browser global),
 * here in a VM context with a `window` of its own.
 */
import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { runInNewContext } from 'node:vm';

interface Step {
  step: string;
  at: string;
  detail: string;
}
interface Phase {
  phase: string;
  start: Date;
  end: Date;
}
interface Timeline {
  stepsOf: (call: Record<string, unknown>) => Step[];
  phasesOf: (call: Record<string, unknown>, now: number) => Phase[];
}

function timeline(): Timeline {
  const window: { readieTimeline?: Timeline } = {};
  runInNewContext(readFileSync('src/ui/assets/timeline.js', 'utf8'), { window });
  return window.readieTimeline!;
}

const at = (seconds: number) => new Date(Date.UTC(2026, 11, 5, 12) + seconds * 1000).toISOString();
const why = "tenant acme holds 1 slot, its quota's maxSlots 1";

describe('the dashboard timeline of a queued call', () => {
  const { stepsOf, phasesOf } = timeline();

  it('given a call queued then admitted, then its steps say why and how long, and its phases draw the wait', () => {
    const call = {
      requestedAt: at(0),
      requestedSeq: 3,
      queuedAt: at(0),
      queuedWhy: why,
      admittedAt: at(40),
      queueWaitMs: 40_000,
      attempts: [{ workerId: 'w1', placedAt: at(40) }],
      boundAt: at(41),
      finishedAt: at(44),
      state: 'succeeded',
      code: 'OK',
      containerId: 'c1',
    };
    const steps = stepsOf(call);
    expect(steps.map((s) => s.step)).to.deep.equal([
      'requested',
      'queued',
      'admitted',
      'placed',
      'bound',
      'finished',
    ]);
    expect(steps[1]!.detail).to.equal(why);
    expect(steps[2]!.detail).to.equal('after 40000 ms in the queue');
    const queued = phasesOf(call, Date.parse(at(60))).filter((p) => p.phase === 'queued');
    expect(queued.map((p) => [p.start.toISOString(), p.end.toISOString()])).to.deep.equal([
      [at(0), at(40)],
    ]);
  });

  it('given a call that left the queue, then it ends with "left queue"; one still waiting is drawn queued until now', () => {
    const left = {
      requestedAt: at(0),
      queuedAt: at(0),
      queuedWhy: why,
      queueWaitMs: 5000,
      attempts: [],
      finishedAt: at(5),
      state: 'rejected',
      code: 'DEADLINE_EXCEEDED',
      message: "left the queue after 5.0s (its client's deadline passed): gone",
    };
    expect(stepsOf(left).at(-1)).to.deep.include({
      step: 'left queue',
      detail: "DEADLINE_EXCEEDED: left the queue after 5.0s (its client's deadline passed): gone",
    });
    const waiting = { requestedAt: at(0), queuedAt: at(1), queuedWhy: why, attempts: [] };
    const phases = phasesOf(waiting, Date.parse(at(30)));
    expect(phases.find((p) => p.phase === 'queued')?.end.toISOString()).to.equal(at(30));
  });
});
