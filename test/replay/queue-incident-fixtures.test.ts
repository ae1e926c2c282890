/**
 * The fixtures recorded from a real run with the admission queue on (docs/replay.md, "Fixtures
 * from a real run"): `replay verify` reproduces each exactly, admissions and quota changes
 * included, and catches an admission made in another order at its seq; `replay explain` of the
 * call admitted first though it arrived later names why (its tenant's slots held beside the
 * other's); `replay whatif --quota` on the quota change's log shows the capped call placed at once
 * under a table without the cap, and refuses a bad table naming flag and field (exit 2).
 */
import { expect } from 'chai';
import { join } from 'node:path';
import type { ClusterEvent } from '../../src/events/index.js';
import { readEvents, replayCli, replayEvents, ROOT } from '../support/replay.js';

const INCIDENT = join(ROOT, 'fixtures', 'admission-fewer-slots-first.jsonl');
const QUOTA = join(ROOT, 'fixtures', 'quota-cap-queues-then-lifted.jsonl');

function types(events: readonly ClusterEvent[]): string[] {
  return events.map((e) => `${e.type}${'requestId' in e ? ` ${String(e.requestId)}` : ''}`);
}

describe('fixtures recorded with the admission queue', function () {
  this.timeout(60_000);

  it('admission-fewer-slots-first: beta-late, queued after alpha-early, is admitted first; verify reproduces it and catches the other order', () => {
    const events = readEvents(INCIDENT);
    const story = types(events);
    const queuedEarly = story.indexOf('CallQueued alpha-early');
    expect(queuedEarly).to.be.lessThan(story.indexOf('CallQueued beta-late'));
    expect(story.indexOf('CallAdmitted beta-late')).to.be.lessThan(
      story.indexOf('CallAdmitted alpha-early'),
    );
    const results = replayEvents(events);
    expect(results.map((r) => r.recorded)).to.not.include('diverged');
    expect(results.filter((r) => r.recorded === 'match')).to.have.length(results.length);

    // The same log with the first admission given to alpha-early: verify diverges there.
    const first = events.find((e) => e.type === 'CallAdmitted')!;
    const swapped = events.map((e) =>
      e.cause === first.cause && 'requestId' in e
        ? { ...e, requestId: 'alpha-early', cause: 'admit:alpha-early' }
        : e,
    );
    const divergence = replayEvents(swapped).find((r) => r.recorded === 'diverged');
    expect(divergence?.seq).to.equal(first.seq);
    expect(divergence?.divergence).to.equal(
      'CallPlaced.requestId: recorded alpha-early, now beta-late',
    );
  });

  it('quota-cap-queues-then-lifted: the cap queues alpha-capped with room, beta-1 is placed, the removal admits it; a changed cap diverges at the call', () => {
    const events = readEvents(QUOTA);
    const story = types(events);
    const cap = story.indexOf('QuotaChanged');
    expect(cap).to.be.greaterThan(-1);
    expect(story.slice(cap + 1, cap + 5)).to.deep.equal([
      'CallRequested alpha-capped',
      'CallQueued alpha-capped',
      'CallRequested beta-1',
      'CallPlaced beta-1',
    ]);
    expect(story.slice(story.indexOf('QuotaRemoved') + 1).slice(0, 2)).to.deep.equal([
      'CallAdmitted alpha-capped',
      'CallPlaced alpha-capped',
    ]);
    expect(replayEvents(events).map((r) => r.recorded)).to.not.include('diverged');
    const wider = events.map((e) => (e.type === 'QuotaChanged' ? { ...e, maxSlots: 2 } : e));
    const divergence = replayEvents(wider).find((r) => r.recorded === 'diverged');
    expect(divergence?.requestId).to.equal('alpha-capped');
    expect(divergence?.divergence).to.equal('recorded CallQueued, now CallPlaced');
  });

  it('replay verify exits 0 on both, through the CLI', () => {
    for (const log of [INCIDENT, QUOTA]) {
      const verify = replayCli('verify', log);
      expect(verify.status, verify.stdout + verify.stderr).to.equal(0);
    }
  });

  it('replay explain beta-late says it went ahead of alpha-early because beta held fewer slots (0 vs 2)', () => {
    const explain = replayCli('explain', INCIDENT, 'beta-late', '--json');
    expect(explain.status, explain.stderr).to.equal(0);
    const wait = (JSON.parse(explain.stdout) as { queueWait: Record<string, unknown> }).queueWait;
    expect(wait.admittedAhead).to.equal(1);
    expect(wait.ahead).to.deep.equal([
      {
        queuedSeq: readEvents(INCIDENT).find(
          (e) => e.type === 'CallQueued' && e.requestId === 'alpha-early',
        )!.seq,
        requestId: 'alpha-early',
        tenantId: 'alpha',
        held: 2,
        ownHeld: 0,
        why: 'its tenant held fewer slots (beta 0, alpha 2)',
      },
    ]);
    // The call history read from the log tells its wait as the router's did.
    const lifecycle = (JSON.parse(explain.stdout) as { lifecycle: Record<string, unknown> })
      .lifecycle;
    const events = readEvents(INCIDENT);
    const queued = events.find((e) => e.type === 'CallQueued' && e.requestId === 'beta-late')!;
    const admitted = events.find((e) => e.type === 'CallAdmitted' && e.requestId === 'beta-late')!;
    expect(lifecycle).to.include({
      queuedAt: queued.at,
      admittedAt: admitted.at,
      queuedWhy: queued.type === 'CallQueued' ? queued.why : '',
      queueWaitMs: Date.parse(admitted.at) - Date.parse(queued.at),
    });
    const screen = replayCli('explain', INCIDENT, 'beta-late');
    expect(screen.stdout).to.match(/admitted +\S+ +\+\d+ms +after \d+ms in the queue/);
    expect(screen.stdout).to.contain('admitted ahead of 1 call of another tenant queued before it');
    expect(screen.stdout).to.match(
      /alpha-early of tenant alpha, queued at seq \d+: its tenant held fewer slots \(beta 0, alpha 2\)/,
    );
  });

  it('replay whatif --quota on the recorded log: without the cap alpha-capped is placed at once; a bad table exits 2 naming flag and field', () => {
    const whatif = replayCli('whatif', QUOTA, '--quota', 'none', '--json');
    expect(whatif.status, whatif.stderr).to.equal(0);
    const lines = whatif.stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(lines.slice(0, -1)).to.have.length(1);
    expect(lines[0]).to.deep.include({
      requestId: 'alpha-capped',
      change: 'queued-to-placed',
      before: "queued: tenant alpha holds 1 slot, its quota's maxSlots 1",
      after: 'placed on w1',
      waitsLess: ['alpha-capped'],
    });
    expect(lines.at(-1)).to.deep.include({
      summary: {
        calls: 3,
        changed: 1,
        'placed-to-queued': 0,
        'placed-to-refused': 0,
        'queued-to-placed': 1,
        'queued-to-refused': 0,
        'refused-to-placed': 0,
        'refused-to-queued': 0,
        'admitted-another': 0,
        'admits-none': 0,
        'admitted-earlier': 0,
        waitsLonger: [],
        waitsLess: ['alpha-capped'],
        refused: [],
        quotas: {},
      },
    });
    const bad = replayCli('whatif', QUOTA, '--quota', 'tenant=alpha,weight=0');
    expect(bad.status).to.equal(2);
    expect(bad.stderr).to.equal(
      'replay: --quota tenant=alpha,weight=0: weight must be a number above 0 and at most 1000000 (got 0)\n',
    );
  });
});
