/**
 * `replay verify` makes again every decision of the core the log holds the input of, not only
 * placement's: given a log written as a router writes it (each decision of the core's table
 * appended with its cause and its time), it verifies; a changed reaper pass, a changed report's
 * consequence and a changed end are each caught at their seq.
 */
import { expect } from 'chai';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { decide } from '../../src/core/decisions.js';
import type { Decision } from '../../src/core/decision.js';
import { PlacementCaches, type PlacedDecision } from '../../src/core/placement/index.js';
import { causeText, encodeEvent, type ClusterEvent } from '../../src/events/index.js';
import { applyInPlace, initialState, type ClusterState } from '../../src/projections/index.js';
import { DEFAULT_CONFIG } from '../../src/shared/config.js';
import { Replayer } from '../../replay/engine/replayer.js';
import type { DecisionResult } from '../../replay/engine/append-check.js';
import { demand } from '../support/events.js';
import { replayCli } from '../support/replay.js';
import { cleanTempDirs, tempDir } from '../support/temp.js';

const T0 = Date.UTC(2026, 11, 1, 10);

/** A log as a router writes it: each decision made by the core's table, appended at `ms`. */
class RouterLog {
  state: ClusterState = initialState();
  readonly events: ClusterEvent[] = [];
  readonly caches = new PlacementCaches();

  record(decision: Decision, ms: number): this {
    for (const event of decision.events) {
      const stamped = {
        seq: this.events.length + 1,
        at: new Date(T0 + ms).toISOString(),
        cause: causeText(decision.cause),
        ...event,
      } as ClusterEvent;
      this.events.push(stamped);
      this.state = applyInPlace(this.state, stamped, this.caches);
    }
    return this;
  }

  /** A session call placed, bound to `containerId` and finished OK. */
  sessionCall(requestId: string, sessionId: string, containerId: string, ms: number): this {
    const made = decide('call', this.state, {
      call: { requestId, sessionId, tenantId: null, retryOf: null, demand: demand() },
      caches: this.caches,
    });
    this.record(made, ms);
    const placed = made.placement as PlacedDecision;
    this.record(
      decide('answer', this.state, {
        requestId,
        sessionId,
        placed,
        ids: {
          requestId,
          sessionId,
          workerId: placed.workerId,
          containerId,
          checkpointId: '',
          version: '',
          routingRevision: 0,
        },
      }),
      ms + 100,
    );
    return this.record(decide('end', this.state, { requestId, code: null }), ms + 200);
  }
}

/** The log: w1 with two sessions; c1 reported removed; w1 then silent past WORKER_TTL. */
function routerLog(): ClusterEvent[] {
  const log = new RouterLog();
  const report = (workerId: string) => ({
    workerId,
    status: 'ready' as const,
    address: `${workerId}.local:1`,
    error: null,
    flavor: 'cpu' as const,
    memoryTotal: 16 * 1024 ** 3,
    maxContainers: 8,
    gpuMemoryTotal: null,
    instanceId: `i-${workerId}`,
    containers: null,
    reportSeq: null,
  });
  log.record(decide('start', log.state, { config: DEFAULT_CONFIG, version: 'test' }), 0);
  log.record(decide('statusReport', log.state, { report: report('w1') }), 1_000);
  log.sessionCall('r1', 's1', 'c1', 2_000);
  log.sessionCall('r2', 's2', 'c2', 3_000);
  // A call of s2 that waited SESSION_WAIT_TIMEOUT (60 s by default) behind another: refused.
  log.record(
    decide('turnRefusal', log.state, {
      requestId: 'r3',
      sessionId: 's2',
      tenantId: null,
      waitedMs: 60_000,
      ahead: 0,
    }),
    3_500,
  );
  log.record(
    decide('containerReport', log.state, {
      workerId: 'w1',
      containerId: 'c1',
      state: 'removed',
      checkpointId: null,
      instanceId: 'i-w1',
      reportSeq: null,
    }),
    4_000,
  );
  log.record(decide('statusReport', log.state, { report: report('w2') }), 20_000);
  log.record(decide('reaper', log.state, { now: T0 + 40_000 }), 40_000);
  return log.events;
}

function decisions(events: readonly ClusterEvent[]): DecisionResult[] {
  const results: DecisionResult[] = [];
  const replayer = new Replayer({ onDecision: (result) => results.push(result) });
  for (const event of events) replayer.push(event);
  replayer.end();
  return results;
}

/** A copy of `events` with the event at `seq` changed. */
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

function seqOf(events: readonly ClusterEvent[], match: (event: ClusterEvent) => boolean): number {
  const found = events.find(match);
  if (!found) throw new Error('no such event');
  return found.seq;
}

describe('replay verify: every decision of the core, made again', () => {
  after(cleanTempDirs);
  const events = routerLog();

  it('given a log as a router writes it, then every report, end and reaper pass is made again and matches', () => {
    const results = decisions(events);
    expect(results.map((r) => [r.trigger, r.recorded])).to.deep.equal([
      ['statusReport', 'match'],
      ['end', 'match'],
      ['end', 'match'],
      ['turnRefusal', 'match'],
      ['containerReport', 'match'],
      ['statusReport', 'match'],
      ['reaper', 'match'],
    ]);
    // The reaper pass evicted w1 and expired the session left on it; the report, its session.
    const reaper = results.find((r) => r.trigger === 'reaper');
    expect(reaper?.recordedEvents.map((e) => e.type)).to.deep.equal([
      'WorkerEvicted',
      'SessionExpired',
    ]);
    const report = results.find((r) => r.trigger === 'containerReport');
    expect(report?.recordedEvents.map((e) => e.type)).to.deep.equal([
      'ContainerStateChanged',
      'SessionExpired',
    ]);
  });

  it('when a reaper pass is changed (a session expired for another reason), then it diverges at that pass', () => {
    const expiry = seqOf(events, (e) => e.type === 'SessionExpired' && e.cause === 'reaper');
    const results = decisions(
      changed(events, expiry, (event) => (event.reason = 'container_removed')),
    );
    const divergence = results.find((r) => r.recorded === 'diverged');
    expect(divergence?.trigger).to.equal('reaper');
    expect(divergence?.seq).to.equal(expiry - 1);
    expect(divergence?.divergence).to.equal(
      'SessionExpired.reason: recorded container_removed, now worker_evicted',
    );
  });

  it("when a report's consequence is dropped from the log, then the report diverges at its seq", () => {
    const report = seqOf(
      events,
      (e) => e.type === 'ContainerStateChanged' && e.state === 'removed',
    );
    const without = events.filter((e) => e.seq !== report + 1);
    const divergence = decisions(without).find((r) => r.recorded === 'diverged');
    expect(divergence).to.deep.include({ trigger: 'containerReport', seq: report });
    expect(divergence?.divergence).to.equal(
      'placement now also makes a SessionExpired the log does not record',
    );
  });

  it('when a session-busy refusal is changed to a wait shorter than SESSION_WAIT_TIMEOUT, then the turn diverges', () => {
    const refusal = seqOf(events, (e) => e.type === 'SessionTurnRefused');
    const divergence = decisions(changed(events, refusal, (event) => (event.waitedMs = 500))).find(
      (r) => r.recorded === 'diverged',
    );
    expect(divergence).to.deep.include({ trigger: 'turnRefusal', seq: refusal });
    expect(divergence?.divergence).to.equal(
      'recorded a SessionTurnRefused that placement no longer makes',
    );
  });

  it('the replay verify command exits 1 naming the decision, and 0 for the log as written', () => {
    const dir = tempDir('readie-decisions-');
    const write = (name: string, list: readonly ClusterEvent[]) => {
      const path = join(dir, name);
      writeFileSync(path, list.map((e) => `${encodeEvent(e)}\n`).join(''));
      return path;
    };
    const good = replayCli('verify', write('good.jsonl', events));
    expect(good.status, good.stdout + good.stderr).to.equal(0);
    expect(good.stdout).to.match(/and 7 other decisions of the core/);
    const evicted = seqOf(events, (e) => e.type === 'WorkerEvicted');
    const bad = replayCli(
      'verify',
      write(
        'bad.jsonl',
        changed(events, evicted, (event) => (event.reason = 'probe')),
      ),
    );
    expect(bad.status).to.equal(1);
    expect(bad.stdout).to.contain(
      `DIVERGED at the reaper pass (cause reaper) at seq ${evicted}, 2026-12-01T10:00:40.000Z`,
    );
    expect(bad.stdout).to.contain(
      'first difference: WorkerEvicted.reason: recorded probe, now ttl',
    );
  });
});
