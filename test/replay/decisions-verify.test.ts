/**
 * `replay verify` makes again every decision of the core the log holds the input of, not only
 * placement's: given a log written as a router writes it (each decision of the core's table
 * appended with its cause and its time), it verifies; a changed reaper pass, a changed report's
 * consequence, a changed residency report, a changed answer, a changed recovery at a router's
 * start and a changed end are each caught at their seq.
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
import { VERSIONS_CATALOGUE } from '../support/routing.js';
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
  log.record(
    decide('start', log.state, {
      config: DEFAULT_CONFIG,
      version: 'test',
      catalogue: { catalogue: VERSIONS_CATALOGUE, revision: 'v' },
    }),
    0,
  );
  log.record(decide('statusReport', log.state, { report: report('w1') }), 1_000);
  // The worker's versions: a budget, one listed version resident, one unlisted (left out).
  log.record(
    decide('residencyReport', log.state, {
      workerId: 'w1',
      residentMemory: 4 * 1024 ** 3,
      versions: [
        { checkpointId: 'policy-v1', state: 'resident', error: null },
        { checkpointId: 'not-in-the-catalogue', state: 'resident', error: null },
        { checkpointId: 'policy-v2', state: 'failed', error: 'out of memory' },
      ],
    }),
    1_500,
  );
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
  // A session call in flight on w2 when the router stops: the next start releases it, and the
  // pin it created.
  const inFlight = decide('call', log.state, {
    call: { requestId: 'r4', sessionId: 's4', tenantId: null, retryOf: null, demand: demand() },
    caches: log.caches,
  });
  log.record(inFlight, 41_000);
  const placed = inFlight.placement as PlacedDecision;
  log.record(
    decide('answer', log.state, {
      requestId: 'r4',
      sessionId: 's4',
      placed,
      ids: {
        requestId: 'r4',
        sessionId: 's4',
        workerId: placed.workerId,
        containerId: 'c4',
        checkpointId: '',
        version: '',
        routingRevision: 0,
      },
    }),
    41_100,
  );
  // Another call of s4 waited its turn behind r4 for SESSION_WAIT_TIMEOUT: refused.
  log.record(
    decide('turnRefusal', log.state, {
      requestId: 'r5',
      sessionId: 's4',
      tenantId: null,
      waitedMs: 60_000,
      ahead: 1,
    }),
    45_000,
  );
  log.record(
    decide('start', log.state, {
      config: DEFAULT_CONFIG,
      version: 'test',
      catalogue: { catalogue: VERSIONS_CATALOGUE, revision: 'v' },
    }),
    50_000,
  );
  // w2 reports after the restart: the start is not the log's last append.
  log.record(decide('statusReport', log.state, { report: report('w2') }), 51_000);
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
      ['start', 'match'],
      ['statusReport', 'match'],
      ['residencyReport', 'match'],
      ['answer', 'match'],
      ['end', 'match'],
      ['answer', 'match'],
      ['end', 'match'],
      ['turnRefusal', 'match'],
      ['containerReport', 'match'],
      ['statusReport', 'match'],
      ['reaper', 'match'],
      ['answer', 'match'],
      ['turnRefusal', 'match'],
      ['start', 'match'],
      ['statusReport', 'match'],
    ]);
    const types = (trigger: string) =>
      results.filter((r) => r.trigger === trigger).map((r) => r.recordedEvents.map((e) => e.type));
    // The first start loaded the catalogue; the second found it in force and released r4, whose
    // first answer had pinned s4.
    expect(types('start')).to.deep.equal([
      ['RouterStarted', 'CatalogueLoaded'],
      ['RouterStarted', 'ReservationExpired', 'SessionUnpinned'],
    ]);
    expect(types('residencyReport')).to.deep.equal([
      ['ResidencyBudget', 'ResidencyChanged', 'ResidencyChanged'],
    ]);
    expect(types('answer')).to.deep.equal([
      ['CallBound', 'SessionPinned'],
      ['CallBound', 'SessionPinned'],
      ['CallBound', 'SessionPinned'],
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

  it('given a v1 log (its consequences implied by the fold), when it leaves out a session a report expired, then it still verifies', () => {
    const report = seqOf(
      events,
      (e) => e.type === 'ContainerStateChanged' && e.state === 'removed',
    );
    const v1 = events
      .filter((e) => e.seq !== report + 1)
      .map((e) => (e.type === 'RouterStarted' ? { ...e, schemaVersion: null } : e));
    const results = decisions(v1);
    expect(results.filter((r) => r.recorded === 'diverged')).to.deep.equal([]);
    expect(results.find((r) => r.trigger === 'containerReport')?.recorded).to.equal('match');
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

  it('when a residency report records a version the catalogue does not list, then the report diverges', () => {
    const changedVersion = seqOf(
      events,
      (e) => e.type === 'ResidencyChanged' && e.checkpointId === 'policy-v2',
    );
    const divergence = decisions(
      changed(events, changedVersion, (event) => (event.checkpointId = 'not-listed')),
    ).find((r) => r.recorded === 'diverged');
    expect(divergence).to.deep.include({ trigger: 'residencyReport', seq: changedVersion - 2 });
    expect(divergence?.divergence).to.equal(
      'recorded a ResidencyChanged that placement no longer makes',
    );
  });

  it('when a residency report records a budget that did not change, then the report diverges', () => {
    const budget = seqOf(events, (e) => e.type === 'ResidencyBudget');
    const repeated = events.flatMap((event) =>
      event.seq === budget + 2
        ? [
            event,
            {
              ...event,
              seq: budget + 2.5,
              type: 'ResidencyBudget',
              residentMemory: 4 * 1024 ** 3,
              cause: 'report:w1',
            } as unknown as ClusterEvent,
          ]
        : [event],
    );
    // The second report (seq budget + 2.5) says the budget again: the core records no change.
    const divergence = decisions(repeated).find((r) => r.recorded === 'diverged');
    expect(divergence?.trigger).to.equal('residencyReport');
    expect(divergence?.divergence).to.equal(
      'recorded a ResidencyBudget that placement no longer makes',
    );
  });

  it("when an answer's session pin names another worker, then the answer diverges at its seq", () => {
    const pin = seqOf(events, (e) => e.type === 'SessionPinned' && e.sessionId === 's1');
    const divergence = decisions(changed(events, pin, (event) => (event.workerId = 'w9'))).find(
      (r) => r.recorded === 'diverged',
    );
    expect(divergence).to.deep.include({ trigger: 'answer', seq: pin - 1 });
    expect(divergence?.divergence).to.equal('SessionPinned.workerId: recorded w9, now w1');
  });

  it('when a start leaves out the release of a call in flight, then the start diverges at its seq', () => {
    const release = seqOf(events, (e) => e.type === 'ReservationExpired' && e.cause === 'start');
    const divergence = decisions(
      events.filter((e) => e.seq !== release && e.seq !== release + 1),
    ).find((r) => r.recorded === 'diverged');
    expect(divergence).to.deep.include({ trigger: 'start', seq: release - 1 });
    expect(divergence?.divergence).to.equal(
      'placement now also makes a ReservationExpired the log does not record',
    );
  });

  it('replay explain shows a session-busy refusal: its wait, the call it waited behind, the refusal made again', () => {
    const path = join(tempDir('readie-turn-'), 'log.jsonl');
    writeFileSync(path, events.map((e) => `${encodeEvent(e)}\n`).join(''));
    const refusal = seqOf(events, (e) => e.type === 'SessionTurnRefused');
    const shown = replayCli('explain', path, 'r3');
    expect(shown.status, shown.stderr).to.equal(0);
    expect(shown.stdout).to.contain(
      `Request r3 in session s2, seq ${refusal}, 2026-12-01T10:00:03.500Z`,
    );
    expect(shown.stdout).to.contain(
      'Refused before placement: RESOURCE_EXHAUSTED "session is busy". It waited 60000 ms for its session\'s turn (SESSION_WAIT_TIMEOUT 60000 ms)',
    );
    expect(shown.stdout).to.contain('Decision now: refused the same way (recorded: match)');
    expect(shown.stdout).to.match(/turn waited .*60000ms for its session's turn/);
    expect(shown.stdout).to.match(
      /refused +2026-12-01T10:00:03\.500Z +\+60000ms +RESOURCE_EXHAUSTED: session is busy/,
    );
    // r2, the call of s2 before it, had finished at 3.2 s: nothing of the session in flight.
    expect(shown.stdout).to.contain('Calls of the session in flight at the refusal: none');
    // r5 waited behind r4, still running on w2 in container c4.
    const behind = replayCli('explain', path, 'r5');
    expect(behind.stdout).to.contain('with 1 other call(s) of the session waiting ahead of it');
    expect(behind.stdout).to.match(
      /Calls of the session in flight at the refusal:\n.*\n *r4 +w2 +c4 +2026-12-01T10:00:41\.000Z/,
    );
    const json = replayCli('explain', path, 'r3', '--json');
    expect(JSON.parse(json.stdout)).to.deep.include({ recorded: 'match', waitTimeoutMs: 60_000 });
    const unknown = replayCli('explain', path, 'nobody');
    expect(unknown.status).to.not.equal(0);
    expect(unknown.stderr).to.contain(
      'no CallRequested and no SessionTurnRefused for request nobody',
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
    expect(good.stdout).to.match(/and 15 other decisions of the core/);
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
