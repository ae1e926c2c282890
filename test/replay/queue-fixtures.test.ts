/**
 * The queue and the fixtures (docs/placement.md, "The admission queue"): every fixture recorded
 * before the queue replays as recorded with the queue present (they record no `QUEUE_TIMEOUT` and
 * older rules), even when asked to queue (a fixture recorded with the queue off under rules that
 * queue, 5 on, queues when asked: it is asked only to replay as recorded); and every fixture
 * recorded without the queue, its log restarted under this code's
 * rules with `QUEUE_TIMEOUT=0` decides exactly as recorded, but for a call that never fits,
 * refused with the same code in words that name the largest offer, and a session's call placed in
 * its pinned container, which appends no `SessionPinned` (rules 11). The fixtures recorded with the
 * queue in force pin the queue itself (queue-incident-fixtures.test.ts).
 */
import { expect } from 'chai';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import type { ClusterEvent } from '../../src/events/index.js';
import { decidesAdmission, PLACEMENT_RULES_VERSION } from '../../src/core/placement/index.js';
import { readEvents, replayEvents, ROOT } from '../support/replay.js';

const FIXTURES = join(ROOT, 'fixtures');
const names = readdirSync(FIXTURES)
  .filter((file) => file.endsWith('.jsonl') && !file.endsWith('.expected.jsonl'))
  .map((file) => file.slice(0, -'.jsonl'.length))
  .filter((name) => !recordsQueue(readEvents(join(FIXTURES, `${name}.jsonl`))));

/** Whether a log was recorded with the admission queue in force (a `QUEUE_TIMEOUT` above 0). */
export function recordsQueue(events: readonly ClusterEvent[]): boolean {
  return events.some(
    (event) => event.type === 'RouterStarted' && Number(event.config.QUEUE_TIMEOUT ?? 0) > 0,
  );
}

/** `events` with every `RouterStarted` under this code's rules and `QUEUE_TIMEOUT` 0 recorded. */
function underAdmissionRules(events: readonly ClusterEvent[]): ClusterEvent[] {
  return events.map((event) =>
    event.type === 'RouterStarted'
      ? {
          ...event,
          rulesVersion: PLACEMENT_RULES_VERSION,
          config: { ...event.config, QUEUE_TIMEOUT: 0 },
        }
      : event,
  );
}

describe('the admission queue and every fixture recorded before it', () => {
  it('leaves out only the fixtures recorded with the queue', () => {
    expect(names).to.include('memory-headroom-boundary');
    expect(names).to.not.include('admission-fewer-slots-first');
  });

  for (const name of names) {
    const events = readEvents(join(FIXTURES, `${name}.jsonl`));
    const started = events.find((event) => event.type === 'RouterStarted');
    const beforeQueue = !decidesAdmission(
      started?.type === 'RouterStarted' ? started.rulesVersion : null,
    );
    const asked = beforeQueue ? { QUEUE_TIMEOUT: 600_000 } : {};
    const how = beforeQueue
      ? 'even asked to queue (--set QUEUE_TIMEOUT=10m)'
      : 'with the queue off';
    it(`${name}: as recorded, ${how}; and with QUEUE_TIMEOUT=0 under rules ${PLACEMENT_RULES_VERSION}`, () => {
      for (const result of replayEvents(events, { overrides: asked })) {
        expect(result.recorded, `${result.requestId}: ${result.divergence ?? ''}`).to.not.equal(
          'diverged',
        );
        expect(result.decision.events.some((e) => e.type === 'CallQueued')).to.equal(false);
      }
      for (const result of replayEvents(underAdmissionRules(events))) {
        if (result.recorded !== 'diverged') continue;
        if (result.decision.outcome === 'placed') {
          // Placed where it was, into the session's pinned container, without pinning it again.
          expect(result.divergence).to.equal(
            'recorded a SessionPinned that placement no longer makes',
          );
          expect(result.decision.containerId).to.not.equal(null);
          continue;
        }
        // Else only a never-fit refusal's words may differ: same code, the largest offer named.
        expect(result.decision.outcome, result.divergence ?? '').to.equal('rejected');
        expect(result.divergence).to.match(/^CallRejected\.message: recorded no worker can accept/);
        expect(result.divergence).to.contain('now no worker can ever accept this request');
      }
    });
  }
});
