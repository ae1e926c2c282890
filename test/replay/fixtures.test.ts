import { expect } from 'chai';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ClusterEvent } from '../../src/events/index.js';
import { keepsRulesVersion, recordedRulesVersion } from '../../src/core/placement/index.js';
import { fold } from '../../src/projections/index.js';
import { Replayer } from '../../replay/engine/replayer.js';
import { recordScenario } from '../../replay/engine/scenario.js';
import { SCENARIOS } from '../../fixtures/scenarios/index.js';
import { readEvents, replayEvents, ROOT, runLines } from '../support/replay.js';

const FIXTURES = join(ROOT, 'fixtures');
const names = readdirSync(FIXTURES)
  .filter((file) => file.endsWith('.jsonl') && !file.endsWith('.expected.jsonl'))
  .map((file) => file.slice(0, -'.jsonl'.length))
  .sort();

/** A copy of `events` with the event at `seq` changed by `change`. */
function changed(
  events: readonly ClusterEvent[],
  seq: number,
  change: (event: Record<string, unknown>) => void,
): ClusterEvent[] {
  return events.map((event) => {
    if (event.seq !== seq) return event;
    const copy = structuredClone(event) as unknown as Record<string, unknown>;
    change(copy);
    return copy as unknown as ClusterEvent;
  });
}

function firstDivergence(events: readonly ClusterEvent[]) {
  return replayEvents(events).find((result) => result.recorded === 'diverged');
}

describe('regression fixtures', () => {
  it('has fixtures to check', () => {
    expect(names.length).to.be.at.least(15);
  });

  for (const name of names) {
    describe(name, () => {
      const events = readEvents(join(FIXTURES, `${name}.jsonl`));

      // The expected file pins `recorded` for every call, so a match turning into a divergence
      // fails here, while an incident fixture keeps the divergence it was recorded with.
      it('prints what its .expected.jsonl says', () => {
        expect(
          events.some((e) => e.type === 'CallRequested'),
          'calls',
        ).to.equal(true);
        const expected = readFileSync(join(FIXTURES, `${name}.expected.jsonl`), 'utf8')
          .split('\n')
          .filter(Boolean)
          .map((line) => JSON.parse(line) as unknown);
        expect(runLines(events)).to.deep.equal(expected);
      });

      // As `replay verify` checks it: every decision of the core made again (reports, ends,
      // reaper passes, session turns, ...), not only placements, matches the log.
      it('verifies whole: every decision the core makes again matches what it recorded', () => {
        const diverged: string[] = [];
        let decisions = 0;
        const replayer = new Replayer({
          onDecision: (result) => {
            decisions += 1;
            if (result.recorded === 'diverged') {
              diverged.push(`seq ${result.seq} ${result.trigger}: ${result.divergence ?? ''}`);
            }
          },
        });
        for (const event of events) replayer.push(event);
        replayer.end();
        expect(decisions).to.be.above(0);
        expect(diverged).to.deep.equal([]);
      });

      // Every rules version replays by its own rules: a fixture stays at the version it was
      // recorded under, and a placement changed in it is an incident under that version.
      it('was recorded under rules this build keeps, and a changed outcome is caught at its seq under them', () => {
        const started = events.find((e) => e.type === 'RouterStarted');
        const version = recordedRulesVersion(
          started?.type === 'RouterStarted' ? started.rulesVersion : null,
        );
        expect(keepsRulesVersion(version), `rules v${version} kept`).to.equal(true);
        const outcome = events.find((e) => e.type === 'CallPlaced' || e.type === 'CallRejected');
        if (outcome === undefined || !('requestId' in outcome)) throw new Error('no outcome');
        const opening = events
          .filter(
            (e) =>
              (e.type === 'CallRequested' || e.type === 'CallDialFailed') &&
              e.requestId === outcome.requestId &&
              e.seq < outcome.seq,
          )
          .at(-1);
        const divergence = firstDivergence(
          changed(events, outcome.seq, (event) => {
            if (event.type === 'CallPlaced') event.workerId = 'a-worker-it-never-chose';
            else event.code = 'DATA_LOSS';
          }),
        );
        expect(divergence?.seq).to.equal(opening?.seq);
        expect(divergence?.rulesVersion).to.equal(version);
      });

      // Logs written before events recorded their cause are grouped by order, to the same result.
      // The queue came after causes: a log that queued calls always records them, so it has no
      // such form to compare.
      const queued = events.some((e) => e.type === 'CallQueued');
      if (!queued)
        it('prints the same without causes (a log from before events recorded them)', () => {
          expect(
            events.every((e) => e.cause !== null),
            'every event records its cause',
          ).to.equal(true);
          const expected = readFileSync(join(FIXTURES, `${name}.expected.jsonl`), 'utf8')
            .split('\n')
            .filter(Boolean)
            .map((line) => JSON.parse(line) as unknown);
          expect(runLines(events.map((e) => ({ ...e, cause: null })))).to.deep.equal(expected);
        });
    });
  }

  describe('a changed event is caught at the right seq', () => {
    it("a session's first call recorded for another tenant diverges at the refusal of that tenant's call", () => {
      const events = readEvents(join(FIXTURES, 'foreign-session-and-request-id-refused.jsonl'));
      const first = events.find((e) => e.type === 'CallRequested')!;
      const foreign = events.find(
        (e) => e.type === 'CallRequested' && e.requestId === 'b-in-a-session',
      )!;
      const divergence = firstDivergence(
        changed(events, first.seq, (e) => (e.tenantId = 'tenant-b')),
      );
      expect(divergence?.seq).to.equal(foreign.seq);
      expect(divergence?.divergence).to.equal('recorded CallRejected, now CallPlaced');
    });

    it('a recorded outcome naming another worker diverges at its call', () => {
      const events = readEvents(join(FIXTURES, 'fresh-cluster-picks-first-id.jsonl'));
      const placed = events.find((e) => e.type === 'CallPlaced')!;
      const request = events.find((e) => e.type === 'CallRequested')!;
      const divergence = firstDivergence(changed(events, placed.seq, (e) => (e.workerId = 'w2')));
      expect(divergence?.seq).to.equal(request.seq);
      expect(divergence?.divergence).to.equal('CallPlaced.workerId: recorded w2, now w10');
    });

    it('a changed utilization report makes the next decision diverge, not an earlier one', () => {
      const events = readEvents(join(FIXTURES, 'memory-headroom-boundary.jsonl'));
      const report = events.find((e) => e.type === 'WorkerUtilization')!;
      const nextRequest = events.find((e) => e.type === 'CallRequested' && e.seq > report.seq)!;
      const divergence = firstDivergence(
        changed(events, report.seq, (e) => (e.memoryUsed = 9 * 1024 ** 3)),
      );
      expect(divergence?.seq).to.equal(nextRequest.seq);
      expect(divergence?.divergence).to.equal('recorded CallPlaced, now CallRejected');
    });

    it('a session pin moved to another container diverges at the reuse', () => {
      const events = readEvents(join(FIXTURES, 'session-pin-and-reuse.jsonl'));
      const pin = events.find((e) => e.type === 'SessionPinned')!;
      const reuse = events.filter((e) => e.type === 'CallRequested')[1]!;
      const divergence = firstDivergence(
        changed(events, pin.seq, (e) => (e.containerId = 'elsewhere')),
      );
      expect(divergence?.seq).to.equal(reuse.seq);
      expect(divergence?.divergence).to.equal('CallPlaced.containerId: recorded c1, now elsewhere');
    });

    it('a holder that reported its version loading instead diverges at the next pinned call', () => {
      const events = readEvents(join(FIXTURES, 'pinned-cold-load.jsonl'));
      const resident = events.find((e) => e.type === 'ResidencyChanged' && e.state === 'resident')!;
      const warm = events.find((e) => e.type === 'CallRequested' && e.requestId === 'warm')!;
      const divergence = firstDivergence(
        changed(events, resident.seq, (e) => (e.state = 'loading')),
      );
      expect(divergence?.seq).to.equal(warm.seq);
      expect(divergence?.divergence).to.equal('recorded CallPlaced, now CallRejected');
    });

    it('a placement recorded with another version than the table held diverges at that call', () => {
      const events = readEvents(join(FIXTURES, 'pinned-retry-across-flip.jsonl'));
      const firstTry = events.find((e) => e.type === 'CallPlaced' && e.requestId === 'first-try')!;
      const request = events.find(
        (e) => e.type === 'CallRequested' && e.requestId === 'first-try',
      )!;
      const divergence = firstDivergence(
        changed(events, firstTry.seq, (e) => ((e.version = 'screen-v2'), (e.routingRevision = 2))),
      );
      expect(divergence?.seq).to.equal(request.seq);
      expect(divergence?.divergence).to.equal(
        'CallPlaced.version: recorded screen-v2, now screen-v1',
      );
    });

    it('the image-cost fixture replayed by rules 9 (no image cost) diverges at each call the cost moved', () => {
      const events = readEvents(join(FIXTURES, 'image-cost-placement.jsonl'));
      const nine = changed(events, 1, (e) => (e.rulesVersion = 9));
      const diverged = replayEvents(nine).filter((result) => result.recorded === 'diverged');
      const seqOf = (requestId: string) =>
        events.find((e) => e.type === 'CallRequested' && e.requestId === requestId)?.seq;
      expect(diverged.map((result) => [result.seq, result.divergence])).to.deep.equal([
        [seqOf('held-nowhere'), 'CallPlaced.workerId: recorded g1, now w1'],
        [seqOf('cheap-build-beats-holder'), 'CallPlaced.workerId: recorded g1, now w1'],
      ]);
    });

    it('a changed eviction is caught at the next call of the session it expired', () => {
      const events = readEvents(join(FIXTURES, 'session-expired-after-eviction.jsonl'));
      const eviction = events.find((e) => e.type === 'WorkerEvicted')!;
      const divergence = firstDivergence(
        changed(events, eviction.seq, (e) => ((e.type = 'WorkerLeaving'), delete e.reason)),
      );
      const after = events.find((e) => e.type === 'CallRequested' && e.seq > eviction.seq)!;
      expect(divergence?.seq).to.equal(after.seq);
      // The eviction at seq 12 expired s1; as a departure it leaves s1 to the recorded
      // SessionExpired at seq 13, so only the seq in the message differs.
      expect(eviction.seq).to.equal(12);
      expect(divergence?.divergence).to.equal(
        'CallRejected.message: recorded session expired: session s1 ended at seq 12 (worker_evicted), ' +
          'now session expired: session s1 ended at seq 13 (worker_evicted)',
      );
    });
  });

  // Fixtures were recorded when a fold applied some consequences itself (schema v1). Recorded
  // again by today's core, whose router records schema v2 and whose fold applies events only,
  // every scenario appends those consequences as events: the same log, the same decisions.
  describe('recorded again under schema v2, every scenario is the same log with the same decisions', () => {
    /** An event as text, without what only v2 (or a newer rules version) records. */
    const shape = (event: ClusterEvent) => {
      const fields = { ...event } as Record<string, unknown>;
      delete fields.schemaVersion;
      delete fields.causeSeq;
      delete fields.rulesVersion;
      // Recorded before placement recorded cold loads: absent means false.
      if (event.type === 'CallPlaced' && event.coldLoad === null) fields.coldLoad = false;
      return JSON.stringify(fields);
    };
    for (const [name, scenario] of SCENARIOS) {
      it(name, () => {
        const committed = readEvents(join(FIXTURES, `${name}.jsonl`));
        const recorded = recordScenario(scenario.steps);
        expect(recorded[0]).to.deep.include({ type: 'RouterStarted', schemaVersion: 2 });
        expect(recorded.map(shape)).to.deep.equal(committed.map(shape));
        const expected = readFileSync(join(FIXTURES, `${name}.expected.jsonl`), 'utf8')
          .split('\n')
          .filter(Boolean)
          .map((line) => JSON.parse(line) as unknown);
        expect(runLines(recorded)).to.deep.equal(expected);
        // Each expiry names the seq the v1 fold ended its session at.
        const ended = (events: ClusterEvent[]) =>
          [...fold(events).sessions.values()].map((session) => [
            session.sessionId,
            session.expired?.seq ?? null,
            session.expired?.reason ?? null,
          ]);
        expect(ended(recorded)).to.deep.equal(ended(committed));
      });
    }
  });
});
