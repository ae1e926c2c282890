/**
 * End to end, every part real (router and worker processes, sandboxed Python, the Python client):
 * the screening tier of examples/screening. Two tenants pinned to two versions of a small policy
 * model; a flip after the pre-warm while calls run (no call served by another version than its
 * resolution, checked from the answers and from the log); a rollback with no cold load; a shed
 * and its automatic retry.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { expect } from 'chai';
import type { ClusterEvent, EventOf } from '../../src/events/index.js';
import { ROOT } from '../support/replay.js';
import { finishedLog, readLog } from '../support/router/harness.js';
import {
  startScreeningCluster,
  type Judged,
  type ScreeningCluster,
} from '../support/screening-cluster.js';

const TEXTS = [
  'buy cheap pills now',
  'hello friend, how are you',
  'limited offer click here',
  'the meeting moved to tuesday',
];

const placedOf = (events: readonly ClusterEvent[]) =>
  new Map(
    events
      .filter((e): e is EventOf<'CallPlaced'> => e.type === 'CallPlaced')
      .map((e) => [e.requestId, e]),
  );

/** Every answer was judged by the version readie says served it (the model names itself). */
function expectJudgedByServedVersion(answers: readonly Judged[]): void {
  for (const answer of answers) {
    expect(answer.error, JSON.stringify(answer)).to.equal(undefined);
    expect(answer.version, JSON.stringify(answer)).to.equal(answer.served_version);
  }
}

describe('end to end: tenant-pinned versions (examples/screening)', function () {
  this.timeout(240_000);
  let cluster: ScreeningCluster;

  before(async function () {
    this.timeout(180_000);
    cluster = await startScreeningCluster({
      versions: ['screen-v1', 'screen-v2', 'screen-v3'],
      // screen-v3 loads slowly, so a cold load of it is in flight long enough to shed a call.
      loadSeconds: { 'screen-v3': 6 },
      env: { ROUTING_RETRY_AFTER: '1s' },
    });
  });

  after(async () => {
    await cluster?.stop();
  });

  it('routes two tenants to their two versions once pre-warmed: each answer names the version that judged', async () => {
    await cluster.stage('acme', 'screen-v1', 2);
    await cluster.stage('globex', 'screen-v2', 2);
    await cluster.prewarmed('acme');
    await cluster.prewarmed('globex');
    expect((await cluster.flip('acme')).version).to.equal('screen-v1');
    expect((await cluster.flip('globex')).version).to.equal('screen-v2');
    const acme = await cluster.judge('acme', TEXTS);
    const globex = await cluster.judge('globex', TEXTS);
    expectJudgedByServedVersion([...acme, ...globex]);
    expect(new Set(acme.map((a) => a.version))).to.deep.equal(new Set(['screen-v1']));
    expect(new Set(globex.map((a) => a.version))).to.deep.equal(new Set(['screen-v2']));
    // Two versions give two different judgements of the same texts.
    expect(acme.map((a) => a.verdict + String(a.routing_revision))).to.not.deep.equal(
      globex.map((a) => a.verdict + String(a.routing_revision)),
    );
    const ids = [...acme, ...globex].map((answer) => answer.request_id);
    const placed = placedOf(await finishedLog(cluster.logDir, ids));
    for (const answer of [...acme, ...globex]) {
      expect(placed.get(answer.request_id)).to.deep.include({
        version: answer.served_version,
        coldLoad: false,
        routingRevision: answer.routing_revision,
      });
    }
  });

  it('flips after the pre-warm while calls run: every call is served by the version it resolved to', async () => {
    await cluster.stage('acme', 'screen-v2', 2);
    await cluster.prewarmed('acme');
    const texts = Array.from(
      { length: 24 },
      (_, i) => `message number ${i} ${TEXTS[i % TEXTS.length]}`,
    );
    const placedBefore = placedOf(readLog(cluster.logDir)).size;
    const during = cluster.judge('acme', texts, 3);
    // Flip once the first calls of the batch are placed (on screen-v1), whatever the machine's pace.
    const deadline = Date.now() + 60_000;
    while (placedOf(readLog(cluster.logDir)).size < placedBefore + 3 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const flipped = await cluster.flip('acme');
    // A second batch starts after the flip: its calls meet screen-v2 even if the first is done.
    const after = cluster.judge('acme', texts.slice(0, 6), 3);
    const answers = [...(await during), ...(await after)];
    expectJudgedByServedVersion(answers);
    const events = await finishedLog(
      cluster.logDir,
      answers.map((answer) => answer.request_id),
    );
    const placed = placedOf(events);
    const revisions = new Map(
      events
        .filter((e): e is EventOf<'RoutingRevised'> => e.type === 'RoutingRevised')
        .map((e) => [e.revision, e]),
    );
    for (const answer of answers) {
      const event = placed.get(answer.request_id);
      // The log's resolution is the answer's, and the revision it names set that version.
      expect(event?.version, answer.request_id).to.equal(answer.served_version);
      expect(event?.routingRevision).to.equal(answer.routing_revision);
      expect(revisions.get(answer.routing_revision ?? 0)?.version).to.equal(answer.served_version);
    }
    // Calls before the flip met screen-v1, calls after it screen-v2; the flip was prewarmed, so
    // no call cold-loaded.
    const served = answers.map((answer) => answer.served_version);
    expect(served).to.include('screen-v1');
    expect(served.at(-1)).to.equal('screen-v2');
    expect(flipped.previousVersion).to.equal('screen-v1');
    for (const answer of answers) expect(placed.get(answer.request_id)?.coldLoad).to.equal(false);
  });

  it('rolls back to the retained version with no cold load', async () => {
    const status = await cluster.status();
    const retained = status.retained.find((r) => r.tenantId === 'acme');
    expect(retained?.version).to.equal('screen-v1');
    const change = await cluster.rollback('acme');
    expect(change.version).to.equal('screen-v1');
    expect(change.notes.join(' ')).to.not.match(/cold-load/);
    const answers = await cluster.judge('acme', TEXTS);
    expectJudgedByServedVersion(answers);
    const placed = placedOf(
      await finishedLog(
        cluster.logDir,
        answers.map((answer) => answer.request_id),
      ),
    );
    for (const answer of answers) {
      expect(answer.served_version).to.equal('screen-v1');
      expect(placed.get(answer.request_id)?.coldLoad, 'a rollback needs no cold load').to.equal(
        false,
      );
    }
  });

  it('sheds a call while its version loads, and the client retries it on its own with retry_of', async () => {
    // Staging asks the subset to pre-warm screen-v3 (6 s to load); flipping at once, calls meet
    // a subset whose loader is busy loading: they are shed with a 1 s hint and retried.
    await cluster.stage('globex', 'screen-v3', 1);
    await cluster.flip('globex', true);
    const [answer] = await cluster.judge('globex', ['please judge me during the load']);
    expect(answer?.error, JSON.stringify(answer)).to.equal(undefined);
    expect(answer?.served_version).to.equal('screen-v3');
    expect(answer?.version).to.equal('screen-v3');
    expect(answer?.retry_of, 'the answer came from a retry').to.be.a('string').and.not.equal('');
    const events = await finishedLog(cluster.logDir, [answer!.request_id]);
    const shed = events.find(
      (e): e is EventOf<'CallRejected'> =>
        e.type === 'CallRejected' && e.requestId === answer?.retry_of,
    );
    expect(shed).to.deep.include({
      code: 'RESOURCE_EXHAUSTED',
      retryAfterMs: 1000,
      version: 'screen-v3',
    });
    const retried = events.find(
      (e): e is EventOf<'CallRequested'> =>
        e.type === 'CallRequested' && e.requestId === answer?.request_id,
    );
    expect(retried?.retryOf).to.equal(answer?.retry_of);
    expect(retried?.demand.pinned).to.equal(true);
  });

  it("replays: replay verify reproduces every decision of the tier's log, pinned ones included", () => {
    const verify = spawnSync(
      process.execPath,
      [join(ROOT, 'bin', 'replay.js'), 'verify', cluster.logDir],
      {
        encoding: 'utf8',
      },
    );
    expect(verify.status, verify.stdout + verify.stderr).to.equal(0);
    const run = spawnSync(
      process.execPath,
      [join(ROOT, 'bin', 'replay.js'), 'run', '--json', cluster.logDir],
      {
        encoding: 'utf8',
      },
    );
    const rows = run.stdout
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(rows.filter((row) => row.version !== null).length).to.be.greaterThan(40);
    expect(rows.some((row) => row.retryAfterMs === 1000)).to.equal(true);
  });
});
