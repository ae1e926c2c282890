import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { open as openLmdb } from 'lmdb';
import { PLACEMENT_RULES_VERSION } from '../../src/core/placement/index.js';
import { EventLog, type ClusterEvent } from '../../src/events/index.js';
import { clusterProjection, fold, stateToJson } from '../../src/projections/index.js';
import { readEvents, replayCli, ROOT } from '../support/replay.js';
import { stamped, syntheticLog } from '../support/synthetic-log.js';
import { cleanTempDirs, tempDir } from '../support/temp.js';

const fixture = (name: string) => join(ROOT, 'fixtures', `${name}.jsonl`);

/** A fixture's lines with one line changed. */
function altered(name: string, change: (line: string, index: number) => string): string {
  const path = join(tempDir(), `${name}.jsonl`);
  const lines = readFileSync(fixture(name), 'utf8').split('\n');
  writeFileSync(path, lines.map(change).join('\n'));
  return path;
}

/** A fixture line as if recorded under the rules this code decides by (fixtures keep theirs). */
const underTheseRules = (line: string) =>
  line.replace(/"rulesVersion":\d+/, `"rulesVersion":${PLACEMENT_RULES_VERSION}`);

/**
 * A log cut at a `Snapshot` of the state before the first event `at` picks: the events before
 * it (`before`), and a log that starts with that snapshot, the rest after it (`window`).
 */
function cutAtSnapshot(
  log: string,
  at: (event: ClusterEvent) => boolean,
): { window: string; before: ClusterEvent[]; snapshotSeq: number } {
  const events = readEvents(log);
  const cut = events.findIndex(at);
  const before = events.slice(0, cut);
  const snapshotSeq = cut + 1;
  const snapshot = {
    seq: snapshotSeq,
    at: before.at(-1)?.at,
    cause: null,
    type: 'Snapshot',
    schemaVersion: 1,
    state: stateToJson(fold(before)),
  };
  const window = join(tempDir(), 'from-a-snapshot.jsonl');
  writeFileSync(
    window,
    [snapshot, ...events.slice(cut).map((event) => ({ ...event, seq: event.seq + 1 }))]
      .map((event) => JSON.stringify(event))
      .join('\n') + '\n',
  );
  return { window, before, snapshotSeq };
}

function expectNoStack(stderr: string): void {
  expect(stderr).to.not.match(/\n\s+at /);
}

describe('the replay CLI', function () {
  this.timeout(60_000);
  afterEach(cleanTempDirs);

  it('documents every command in --help', function () {
    // Eight processes one after the other: a loaded machine needs more than the suite's minute.
    this.timeout(150_000);
    const top = replayCli('--help');
    expect(top.status).to.equal(0);
    const helps = new Map<string, string>();
    for (const command of ['run', 'verify', 'explain', 'state', 'export', 'import', 'whatif']) {
      expect(top.stdout).to.contain(command);
      const help = replayCli(command, '--help');
      expect(help.status, command).to.equal(0);
      expect(help.stdout).to.contain(`Usage: replay ${command}`);
      helps.set(command, help.stdout);
    }
    expect(helps.get('run')).to.contain('--set <NAME=VALUE>');
    expect(helps.get('state')).to.contain('--at <seq|time>');
  });

  it('stops quietly when its reader closes the pipe early', () => {
    const log = join(tempDir(), 'large.jsonl');
    const events = [...stamped(syntheticLog({ seed: 3, events: 6_000, workers: 20 }))];
    writeFileSync(log, events.map((event) => JSON.stringify(event)).join('\n'));
    const piped = spawnSync(
      'bash',
      ['-c', 'node bin/replay.js run "$1" --json | head -n 1; exit "${PIPESTATUS[0]}"', '-', log],
      { cwd: ROOT, encoding: 'utf8' },
    );
    expect(piped.stdout.trim().split('\n')).to.have.length(1);
    expectNoStack(piped.stderr);
    expect(piped.stderr).to.not.contain('EPIPE');
    expect(piped.status).to.equal(0);
  });

  it('run --json prints one line per call, as the fixture expects', () => {
    const run = replayCli('run', fixture('memory-headroom-boundary'), '--json');
    expect(run.status).to.equal(0);
    expect(run.stdout).to.equal(
      readFileSync(join(ROOT, 'fixtures', 'memory-headroom-boundary.expected.jsonl'), 'utf8'),
    );
    const first = JSON.parse(run.stdout.split('\n')[0]!) as Record<string, unknown>;
    expect(Object.keys(first)).to.deep.equal([
      'seq',
      'at',
      'requestId',
      'tenantId',
      'outcome',
      'workerId',
      'containerId',
      'checkpointId',
      'packages',
      'skippedPackages',
      'code',
      'message',
      'version',
      'routingRevision',
      'coldLoad',
      'retryAfterMs',
      'recorded',
    ]);
  });

  it('run prints a table and a summary line', () => {
    const run = replayCli('run', fixture('memory-headroom-boundary'));
    expect(run.stdout).to.match(/^SEQ\s+TIME\s+REQUEST\s+TENANT\s+SESSION/);
    expect(run.stdout).to.match(/\n\d+\s+2026-11-30T10:00:\d\d\.000Z\s+\S+\s+-\s+/);
    expect(run.stdout.trimEnd().split('\n').at(-1)).to.equal(
      '4 calls: 2 placed, 2 rejected; recorded: 4 match, 0 diverged, 0 none',
    );
  });

  it('run names a call that waits in the admission queue queued, with why, apart from refusals', () => {
    const run = replayCli('run', fixture('quota-cap-queues-then-lifted'));
    const capped = run.stdout.split('\n').filter((line) => /\balpha-capped\b/.test(line));
    expect(capped).to.have.length(2);
    // Queued where its tenant's cap stopped it (not on the worker placement found), then placed.
    expect(capped[0]).to.match(
      /\balpha-capped\s+alpha\s+-\s+queued\s+-\s+.*tenant alpha holds 1 slot, its quota's maxSlots 1\s+match$/,
    );
    expect(capped[1]).to.match(/\balpha-capped\s+alpha\s+-\s+placed\s+w1\s/);
    expect(run.stdout.trimEnd().split('\n').at(-1)).to.equal(
      '4 calls: 3 placed, 1 queued, 0 rejected; recorded: 4 match, 0 diverged, 0 none',
    );
  });

  it('verify exits 0 on a good log and 1 at the first divergence, saying where and why', () => {
    const good = replayCli('verify', fixture('fresh-cluster-picks-first-id'));
    expect(good.status).to.equal(0);
    expect(good.stdout).to.equal(
      'verified: 2 recorded decisions reproduced exactly, and 3 other decisions of the core (starts, reports, answers, probes, reaper passes, session turns, ends, pin changes)\n',
    );
    const bad = altered('fresh-cluster-picks-first-id', (line) =>
      underTheseRules(line).replace(
        '"type":"CallPlaced","requestId":"r1","sessionId":null,"workerId":"w10"',
        '"type":"CallPlaced","requestId":"r1","sessionId":null,"workerId":"w3"',
      ),
    );
    const diverged = replayCli('verify', bad);
    expect(diverged.status).to.equal(1);
    expect(diverged.stdout).to.contain('DIVERGED at seq 6, request r1');
    expect(diverged.stdout).to.contain(
      'first difference: CallPlaced.workerId: recorded w3, now w10',
    );
    expect(diverged.stdout).to.contain('Why placement decides this now:');
    expect(diverged.stdout).to.contain('rank 1 (chosen)');
  });

  it('verify --jobs takes a whole number of threads, at least 1', () => {
    const log = fixture('fresh-cluster-picks-first-id');
    expect(replayCli('verify', '--jobs', '1', log).status).to.equal(0);
    for (const jobs of ['0', 'two', '-1', '1.5']) {
      const refused = replayCli('verify', '--jobs', jobs, log);
      expect(refused.status, jobs).to.equal(2);
      expect(refused.stderr, jobs).to.contain(
        `--jobs ${jobs}: expected a whole number of threads, at least 1`,
      );
    }
  });

  it("verify decides a log by the rules it recorded: a mutated placement in a v2 log is an incident (exit 1); --rules current asks what today's rules do (exit 3)", () => {
    const mutate = (line: string) =>
      line.replace(
        '"type":"CallPlaced","requestId":"r1","sessionId":null,"workerId":"w10"',
        '"type":"CallPlaced","requestId":"r1","sessionId":null,"workerId":"w3"',
      );
    const v2 = altered('fresh-cluster-picks-first-id', mutate);
    expect(readFileSync(v2, 'utf8')).to.contain('"rulesVersion":2');
    const incident = replayCli('verify', v2);
    expect(incident.status, incident.stdout).to.equal(1);
    expect(incident.stdout).to.contain(
      "DIVERGED at seq 6, request r1: decided by placement rules v2, the log's own",
    );
    expect(incident.stdout).to.not.contain('RULES CHANGED');
    const today = replayCli('verify', '--rules', 'current', v2);
    expect(today.status).to.equal(3);
    expect(today.stdout).to.contain(
      'RULES CHANGED at seq 6, request r1: the log was recorded under placement rules v2; ' +
        `--rules current decides by today's v${PLACEMENT_RULES_VERSION}`,
    );
    expect(today.stdout).to.contain('not an incident');
    // The good fixture verifies by its own rules and by today's.
    const good = fixture('fresh-cluster-picks-first-id');
    expect(replayCli('verify', good).status).to.equal(0);
    expect(replayCli('verify', '--rules', 'current', good).status).to.equal(0);
  });

  it("verify --rules current decides by today's rules from the first call of a log that starts at a snapshot (an archive file), as in the whole log", () => {
    // session-pin-and-reuse, recorded under rules 2: its second call re-pins its session, which
    // today's rules (11) no longer do. The same log cut at a snapshot of the state before that call.
    const { window, snapshotSeq } = cutAtSnapshot(
      fixture('session-pin-and-reuse'),
      (event) => event.type === 'CallRequested' && event.requestId === 'second',
    );
    expect(replayCli('verify', window).status).to.equal(0);
    const today = replayCli('verify', '--rules', 'current', window);
    expect(today.status, today.stdout).to.equal(3);
    expect(today.stdout).to.contain(
      `RULES CHANGED at seq ${snapshotSeq + 1}, request second: the log was recorded under placement rules v2; ` +
        `--rules current decides by today's v${PLACEMENT_RULES_VERSION}`,
    );
    expect(today.stdout).to.contain(
      'first difference: recorded a SessionPinned that placement no longer makes',
    );
  });

  it('verify of a log that starts at a snapshot says how many failed dials it could not decide again (their requests are before it); its two parts check one decision fewer than the whole', () => {
    const name = 'dial-failure-places-again';
    // Cut between r1's placement and its failed dial (placed again on b).
    const { window, before } = cutAtSnapshot(
      fixture(name),
      (event) => event.type === 'CallDialFailed' && event.requestId === 'r1',
    );
    const counts = (stdout: string) =>
      (/verified: (\d+) recorded decisions? reproduced exactly, and (\d+) other/.exec(stdout) ?? [])
        .slice(1)
        .map(Number);
    const whole = replayCli('verify', fixture(name));
    expect(whole.stdout).to.not.contain('failed dial');
    const first = join(tempDir(), 'before-the-dial.jsonl');
    writeFileSync(first, before.map((event) => JSON.stringify(event)).join('\n') + '\n');
    const head = replayCli('verify', first);
    const tail = replayCli('verify', window);
    expect(tail.status, tail.stdout).to.equal(0);
    expect(tail.stdout).to.contain(
      "; 1 failed dial of a call requested before the log's first event was folded, not decided again (give the part of the log that holds its request to decide it)",
    );
    const [wholeCalls = 0, wholeOthers = 0] = counts(whole.stdout);
    const [headCalls = 0, headOthers = 0] = counts(head.stdout);
    const [tailCalls = 0, tailOthers = 0] = counts(tail.stdout);
    expect(wholeCalls).to.be.greaterThan(0);
    expect(headCalls + tailCalls).to.equal(wholeCalls - 1);
    expect(headOthers + tailOthers).to.equal(wholeOthers);
  });

  it("verify of a log that starts at a snapshot decides a failed dial of a call queued before it and admitted after it (its demand is in the snapshot's queue), as the whole log does", () => {
    // b2 (tenant beta) is queued at seq 25, admitted at 42 and placed on w1, its dial fails at 45
    // and it is placed again on w2: a log made through the core's decisions, cut before 36.
    const log = join(ROOT, 'test', 'replay', 'logs', 'queued-call-dial-fails.jsonl');
    const { window } = cutAtSnapshot(log, (event) => event.seq === 36);
    const whole = replayCli('verify', log);
    expect(whole.status, whole.stdout).to.equal(0);
    const cut = replayCli('verify', window);
    expect(cut.status, cut.stdout).to.equal(0);
    expect(cut.stdout).to.not.contain('failed dial');
    // The dial's new placement is decided and matches, in the cut log as in the whole.
    // (the cut log's seqs are one later: the snapshot took a seq)
    const placedAgain = (stdout: string) =>
      stdout
        .split('\n')
        .filter((line) => line.includes('"requestId":"b2"'))
        .map((line) => {
          const { seq: _seq, ...fields } = JSON.parse(line) as Record<string, unknown>;
          return fields;
        });
    const wholeRuns = placedAgain(replayCli('run', '--json', log).stdout);
    const cutRuns = placedAgain(replayCli('run', '--json', window).stdout);
    expect(cutRuns).to.have.length(2);
    expect(cutRuns).to.deep.equal(wholeRuns.slice(-2));
  });

  it("decides a pinned call's deadline shed from the log: verify reproduces it, a call recorded without its deadline diverges, explain names the reason", () => {
    const name = 'pinned-deadline-sheds-cold-load';
    expect(replayCli('verify', fixture(name)).status).to.equal(0);
    // The same call with no deadline in its CallRequested would have cold-loaded instead.
    const noDeadline = altered(name, (line) =>
      line.includes('"type":"CallRequested","requestId":"short"')
        ? line.replace('"deadlineMs":2000', '"deadlineMs":null')
        : line,
    );
    const diverged = replayCli('verify', noDeadline);
    expect(diverged.status).to.equal(1);
    expect(diverged.stdout).to.contain('DIVERGED at seq 16, request short');
    const explained = replayCli('explain', fixture(name), 'short');
    expect(explained.status).to.equal(0);
    expect(explained.stdout).to.contain(
      "Request short, seq 16, 2026-11-30T10:00:16.000Z, tenant acme, its caller's deadline 2s away",
    );
    expect(explained.stdout).to.match(
      /shed: version "screen-v1" is not resident on its subset and a cold load on w\d takes 5s \(its catalogue loadCost\), but the caller's deadline leaves only 2s/,
    );
  });

  it('verify says the rules changed, naming both versions, on a divergence in a log of a version this build does not keep', () => {
    const otherRules = altered('fresh-cluster-picks-first-id', (line) =>
      line
        .replace('"rulesVersion":2', '"rulesVersion":99')
        .replace(
          '"type":"CallPlaced","requestId":"r1","sessionId":null,"workerId":"w10"',
          '"type":"CallPlaced","requestId":"r1","sessionId":null,"workerId":"w3"',
        ),
    );
    const changed = replayCli('verify', otherRules);
    expect(changed.status).to.equal(3);
    expect(changed.stdout).to.contain(
      'RULES CHANGED at seq 6, request r1: the log was recorded under placement rules v99, which ' +
        `this build does not keep (it keeps v2, v3, v4, v5, v6, v7, v8, v9, v10, v${PLACEMENT_RULES_VERSION}); it decides by v${PLACEMENT_RULES_VERSION}`,
    );
    expect(changed.stdout).to.contain('not an incident');
    expect(changed.stdout).to.not.contain('DIVERGED');
    // A log from before routers recorded the version was decided by v1, which is not kept.
    const unversioned = altered('fresh-cluster-picks-first-id', (line) =>
      line
        .replace(',"rulesVersion":2', '')
        .replace(
          '"type":"CallPlaced","requestId":"r1","sessionId":null,"workerId":"w10"',
          '"type":"CallPlaced","requestId":"r1","sessionId":null,"workerId":"w3"',
        ),
    );
    const older = replayCli('verify', unversioned);
    expect(older.status).to.equal(3);
    expect(older.stdout).to.contain(
      'recorded under placement rules v1, which this build does not keep',
    );
    // Under other rules, a log that still reproduces verifies.
    const reproduces = altered('fresh-cluster-picks-first-id', (line) =>
      line.replace('"rulesVersion":2', '"rulesVersion":99'),
    );
    expect(replayCli('verify', reproduces).status).to.equal(0);
  });

  it('explain prints the state at the call and the full explanation', () => {
    const run = replayCli('explain', fixture('gpu-calls-need-gpu-workers'), 'gpu-budget-too-big');
    expect(run.status).to.equal(0);
    for (const part of [
      'Request gpu-budget-too-big',
      'Decision now: rejected RESOURCE_EXHAUSTED',
      'Recorded:',
      'gpu-memory-headroom  fail',
      'flavor               fail',
      'Workers: 2 known',
    ]) {
      expect(run.stdout).to.contain(part);
    }
    const atCall = replayCli('explain', fixture('memory-headroom-boundary'), 'one-more-gib');
    expect(atCall.stdout).to.match(
      /Reservations at this call \(1\):\nREQUEST .*\nexactly-90\s+-\s+w1\s+-\s+checkpoint_0\s+1GiB\s/,
    );
    const session = replayCli('explain', fixture('session-pin-and-reuse'), 'second');
    expect(session.stdout).to.match(
      /Session s1 at this call:\nSESSION .*\ns1\s+w1\/c1\s+checkpoint_0\s+first\s+-\n/,
    );
    expect(session.stdout).to.contain('Reservations at this call: none');
    const json = JSON.parse(
      replayCli('explain', fixture('gpu-calls-need-gpu-workers'), 'gpu-flag', '--json').stdout,
    ) as { explanation: { decision: { workerId: string } } };
    expect(json.explanation.decision.workerId).to.equal('gpu1');
    const missing = replayCli('explain', fixture('gpu-calls-need-gpu-workers'), 'no-such-request');
    expect(missing.status).to.equal(2);
    expect(missing.stderr).to.equal(
      'replay: fixtures-or-path: no CallRequested and no SessionTurnRefused for request no-such-request\n'.replace(
        'fixtures-or-path',
        fixture('gpu-calls-need-gpu-workers'),
      ),
    );
  });

  it("explain says whether the chosen worker had a ready standby of the call's checkpoint", () => {
    // A load report of w10 listing its standbys, before r1 (placed on w10 with checkpoint_0).
    const report =
      '{"seq":6,"at":"2026-11-30T10:00:05.500Z","cause":"report:w10","type":"WorkerUtilization","workerId":"w10","memoryUsed":0,"containerCount":0,"cpuUsed":null,"cpuTotal":null,"gpuMemoryUsed":null,"containers":null,"reportSeq":null,"standbys":[{"checkpointId":"checkpoint_0","ready":2},{"checkpointId":"ckpt-numpy","ready":1}]}';
    const log = altered('fresh-cluster-picks-first-id', (line) => {
      const renumbered = line.replace(/^\{"seq":(\d+)/, (whole, seq: string) =>
        Number(seq) >= 6 ? `{"seq":${Number(seq) + 1}` : whole,
      );
      return line.startsWith('{"seq":6,') ? `${report}\n${renumbered}` : renumbered;
    });
    expect(replayCli('verify', log).status, 'the report changes no decision').to.equal(0);
    const had = replayCli('explain', log, 'r1');
    expect(had.status).to.equal(0);
    expect(had.stdout).to.contain(
      'Standbys on w10 (its load report at 2026-11-30T10:00:05.500Z): checkpoint_0 2, ckpt-numpy 1; checkpoint_0 had 2 ready: the new container was likely one',
    );
    expect(replayCli('explain', log, 'r2').stdout).to.contain(
      'Standbys: w2 reported none before this call',
    );
  });

  it('explain follows a call placed again after failed dials: each attempt against the state it met', () => {
    const run = replayCli('explain', fixture('pinned-dial-failure-keeps-version'), 'r1');
    expect(run.status).to.equal(0);
    expect(run.stdout).to.match(
      /Attempt 2: placed again after a failed dial \(seq 27, [^)]*\): w1 could not be reached: connect ECONNREFUSED\n\nDecision now: placed on w3 [^\n]*\nRecorded: +placed on w3 [^\n]*\(match\)/,
    );
    expect(run.stdout).to.match(
      /w1 +\d+ +#2 +resident \(holds it\) +- +unreachable: a failed dial/,
    );
    expect(run.stdout).to.match(
      /Attempt 3: [^\n]*w3 could not be reached[\s\S]*verdict: shed: the router could not reach w3, w1/,
    );
    const exhausted = JSON.parse(
      replayCli('explain', fixture('dial-failures-exhaust-attempts'), 'r1', '--json').stdout,
    ) as {
      replacements: {
        seq: number;
        workerId: string;
        explanation: { decision: { workerId?: string } } | null;
        decision: { outcome: string; code?: string } | null;
        recorded: string;
      }[];
    };
    expect(exhausted.replacements.map((r) => [r.workerId, r.recorded])).to.deep.equal([
      ['p1', 'match'],
      ['p2', 'match'],
      ['p3', 'match'],
    ]);
    expect(exhausted.replacements[0]?.explanation?.decision.workerId).to.equal('p2');
    // The last failed dial leaves no attempt: refused without a placement to explain.
    expect(exhausted.replacements[2]?.explanation).to.equal(null);
    expect(exhausted.replacements[2]?.decision).to.deep.include({
      outcome: 'rejected',
      code: 'UNAVAILABLE',
    });
  });

  it('state prints the folded state at a seq or a time, as JSON too', () => {
    const events = readEvents(fixture('session-pin-and-reuse'));
    const at = replayCli('state', fixture('session-pin-and-reuse'), '--at', '9', '--json');
    expect(at.status).to.equal(0);
    expect(JSON.parse(at.stdout)).to.deep.equal(
      JSON.parse(JSON.stringify(stateToJson(fold(events.slice(0, 9))))),
    );
    const byTime = replayCli(
      'state',
      fixture('session-pin-and-reuse'),
      '--at',
      events[8]!.at,
      '--json',
    );
    expect(byTime.stdout).to.equal(at.stdout);
    const readable = replayCli('state', fixture('session-pin-and-reuse'));
    expect(readable.stdout).to.contain('Workers (2)');
    expect(readable.stdout).to.match(/s1\s+w1\/c1/);
  });

  it('state of an LMDB log starts from its newest snapshot: the events before it are not read', async () => {
    const dir = join(tempDir(), 'log');
    const log = EventLog.open(dir, { projection: clusterProjection, snapshotEvery: 5 });
    for (const { seq: _seq, at: _at, ...event } of readEvents(fixture('session-pin-and-reuse')))
      log.append(event);
    await log.flushed();
    await log.close();
    const whole = replayCli('state', dir, '--json');
    expect(whole.status, whole.stderr).to.equal(0);
    // Break seq 2, before the first snapshot: folding from the start would trip over it.
    const root = openLmdb({ path: join(dir, 'events.mdb'), maxDbs: 4 });
    root.openDB<string, number>({ name: 'events', encoding: 'string' }).putSync(2, '{"broken"');
    await root.close();
    expect(replayCli('state', dir, '--at', '3').status).to.equal(2);
    const fromSnapshot = replayCli('state', dir, '--json');
    expect(fromSnapshot.status, fromSnapshot.stderr).to.equal(0);
    expect(fromSnapshot.stdout).to.equal(whole.stdout);
  });

  it('import then export gives the same bytes; a mid-log range starts with a Snapshot and stands alone', () => {
    const dir = join(tempDir(), 'log');
    const source = fixture('session-checkpoint-rules');
    const imported = replayCli('import', source, dir);
    expect(imported.status, imported.stderr).to.equal(0);
    expect(imported.stdout).to.match(/^imported \d+ events \(seq 1 to \d+\)/);
    const exported = replayCli('export', dir);
    expect(exported.stdout).to.equal(readFileSync(source, 'utf8'));
    const out = join(tempDir(), 'range.jsonl');
    expect(replayCli('export', dir, '--from', '12', '--to', '20', '-o', out).status).to.equal(0);
    const range = readEvents(out);
    expect(range[0]).to.deep.include({ seq: 11, type: 'Snapshot' });
    expect(range.at(-1)?.seq).to.equal(20);
    const verified = replayCli('verify', out);
    expect(verified.status, verified.stdout).to.equal(0);
    expect(replayCli('run', dir, '--json').stdout).to.equal(
      replayCli('run', source, '--json').stdout,
    );
    expect(replayCli('import', source, dir).status).to.equal(2);
  });

  it('export --from inside an append starts at the append, so a replay of the range sees its decision whole (a cut inside it was verified DIVERGED)', () => {
    // full-report-reconciles-containers: seq 16 to 18 are one worker report's events
    // (cause report:w1); a range from 18 held its last event without the report that made it.
    const dir = join(tempDir(), 'log');
    expect(replayCli('import', fixture('full-report-reconciles-containers'), dir).status).to.equal(
      0,
    );
    const events = readEvents(fixture('full-report-reconciles-containers'));
    expect(events.filter((e) => e.seq >= 16 && e.seq <= 18).map((e) => e.cause)).to.deep.equal([
      'report:w1',
      'report:w1',
      'report:w1',
    ]);
    expect(events.find((e) => e.seq === 15)?.cause).to.not.equal('report:w1');
    const out = join(tempDir(), 'range.jsonl');
    const exported = replayCli('export', dir, '--from', '18', '-o', out);
    expect(exported.status, exported.stderr).to.equal(0);
    expect(exported.stderr).to.equal(
      'replay: --from 18 falls inside an append (its events from seq 16 share one cause): exporting from seq 16, so its decision stands whole\n',
    );
    const range = readEvents(out);
    expect(range[0]).to.deep.include({ seq: 15, type: 'Snapshot' });
    expect(range[1]?.seq).to.equal(16);
    const verified = replayCli('verify', out);
    expect(verified.status, verified.stdout).to.equal(0);
    // At an append's first event, the range starts there, unchanged and quietly.
    const quiet = replayCli('export', dir, '--from', '16', '-o', out);
    expect(quiet.stderr).to.equal('');
    expect(readEvents(out)[1]?.seq).to.equal(16);
  });

  it('whatif lists the calls a changed config would change, with counts', () => {
    const run = replayCli(
      'whatif',
      fixture('memory-headroom-boundary'),
      '--set',
      'MEMORY_HEADROOM=0.5',
    );
    expect(run.status).to.equal(0);
    expect(run.stdout).to.contain('placed-to-rejected');
    expect(run.stdout.trimEnd().split('\n').at(-1)).to.equal(
      '4 calls decided again with MEMORY_HEADROOM=0.5: 2 would change (placed -> rejected 2, rejected -> placed 0, another worker 0, another checkpoint 0, other 0)',
    );
  });

  it('exits 2 naming the line or seq for an unreadable, corrupt or out-of-order log, without a stack trace', () => {
    const corrupt = altered('memory-headroom-boundary', (line, i) =>
      i === 3 ? JSON.stringify({ ...(JSON.parse(line) as object), memoryUsed: 'lots' }) : line,
    );
    const broken = replayCli('run', corrupt);
    expect(broken.status).to.equal(2);
    expect(broken.stderr).to.match(
      /^replay: .*: line 4, seq 4: field "memoryUsed": expected an integer >= 0, got "lots"\n$/,
    );
    expectNoStack(broken.stderr);
    const reordered = altered('memory-headroom-boundary', (line, i) =>
      i === 2 ? line.replace('"seq":3,', '"seq":30,') : line,
    );
    const outOfOrder = replayCli('verify', reordered);
    expect(outOfOrder.status).to.equal(2);
    expect(outOfOrder.stderr).to.contain(
      'line 3, seq 30: field "seq": gap: expected 3 after 2, got 30',
    );
    const missing = replayCli('state', join(tempDir(), 'nothing.jsonl'));
    expect(missing.status).to.equal(2);
    expect(missing.stderr).to.contain('no such file or directory');
    expect(
      replayCli('run', fixture('memory-headroom-boundary'), '--set', 'MEMORY_HEADROOM=lots').status,
    ).to.equal(2);
    expectNoStack(missing.stderr);
  });
});
