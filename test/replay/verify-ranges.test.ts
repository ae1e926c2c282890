/**
 * `replay verify` in ranges: the log cut at snapshots, each range after the first verified in a
 * worker thread of its own, joined at the seams. The answer is always one pass's: the same
 * counts when every seam holds; when one does not (a divergence in a later range, a snapshot that
 * is not the state the fold reached, a read of a call the range never saw), the verify goes on in
 * one pass and reports what one pass reports.
 */
import { expect } from 'chai';
import { cpSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import {
  ArchiveDirectory,
  ArchiveFile,
  EventLog,
  readJsonl,
  type StoredEvent,
} from '../../src/events/index.js';
import type { CallToPlace } from '../../src/core/placement/index.js';
import { decide } from '../../src/core/decisions.js';
import {
  applyInPlace,
  clusterProjection,
  initialState,
  snapshotOf,
  type ClusterState,
} from '../../src/projections/index.js';
import { stateDigest } from '../../replay/engine/seam-digest.js';
import {
  joinRanges,
  verifyLog,
  type RangeThread,
  type VerifyLogOptions,
} from '../../replay/commands/verify-log.js';
import type { RangeResult } from '../../replay/commands/verify-range.js';
import { VerifyTally } from '../../replay/commands/verify-tally.js';
import { Replayer } from '../../replay/engine/replayer.js';
import { joined, SeamMap, seamHolds } from '../../replay/engine/seam-map.js';
import { archivedCluster, rewrittenArchive, testClock } from '../support/archive.js';
import {
  container,
  demand,
  pinned,
  placed,
  registered,
  requested,
  started,
  START_MS,
  utilization,
} from '../support/events.js';
import { cleanTempDirs, tempDir } from '../support/temp.js';

/** Ranges of at least 1,000 events (the command's own floor is 100,000). */
const SMALL_RANGES: VerifyLogOptions = { jobs: 4, minRangeEvents: 1_000 };

describe('replay verify in ranges', function () {
  this.timeout(180_000);
  let cluster: { log: string; archive: string; full: string };
  before(async function () {
    this.timeout(120_000);
    cluster = await archivedCluster(21);
  });
  after(cleanTempDirs);

  it('verifies an archive and its live log in ranges, a thread each, with the counts of one pass', async () => {
    const paths = [cluster.archive, cluster.log];
    const onePass = await verifyLog(paths, { jobs: 1 });
    const inRanges = await verifyLog(paths, SMALL_RANGES);
    expect(onePass.ranges).to.equal(1);
    expect(inRanges.ranges, 'joined from four ranges').to.equal(4);
    expect(onePass.counts.checked).to.be.above(100);
    expect(onePass.counts.others).to.be.above(1_000);
    expect(inRanges.counts).to.deep.equal(onePass.counts);
    expect(inRanges.divergence).to.equal(undefined);
    expect(inRanges.otherDivergence).to.equal(undefined);
    // The live log alone (its own snapshots) splits too.
    const live = await verifyLog(cluster.log, { jobs: 2, minRangeEvents: 1_000 });
    expect(live.ranges).to.equal(2);
    expect(live.counts).to.deep.equal((await verifyLog(cluster.log, { jobs: 1 })).counts);
  });

  it('a divergence in a later range is found and reported as one pass finds it', async () => {
    const files = ArchiveDirectory.open(cluster.archive).entries();
    let workers: string[] = [];
    let tampered: number | undefined;
    const archive = await rewrittenArchive(cluster.archive, files.length - 1, (event) => {
      if (event.type === 'Snapshot') workers = Object.keys(event.state.workers as object);
      if (event.type !== 'CallPlaced' || tampered !== undefined) return event;
      tampered = event.seq;
      return { ...event, workerId: workers.find((id) => id !== event.workerId)! };
    });
    expect(tampered, 'a call placed in the last file').to.be.a('number');
    const onePass = await verifyLog(archive, { jobs: 1 });
    const inRanges = await verifyLog(archive, SMALL_RANGES);
    expect(onePass.divergence?.seq).to.equal(tampered! - 1);
    expect(inRanges.divergence?.seq).to.equal(onePass.divergence?.seq);
    expect(inRanges.divergence?.divergence).to.equal(onePass.divergence?.divergence);
    expect(inRanges.counts).to.deep.equal(onePass.counts);
    expect(inRanges.ranges, 'one pass, past the seam').to.equal(1);
  });

  it('a snapshot that is not the state the fold reached is not started from: one pass goes on', async () => {
    // The second file's snapshot says a worker listens elsewhere: nothing placement reads, so a
    // range started from it would decide as one pass does; only the seam's check sees it.
    const archive = await rewrittenArchive(cluster.archive, 1, (event) => {
      if (event.type !== 'Snapshot') return event;
      const workers = event.state.workers as Record<string, Record<string, unknown>>;
      const [id, record] = Object.entries(workers)[0]!;
      return {
        ...event,
        state: {
          ...event.state,
          workers: { ...workers, [id]: { ...record, address: 'forged:1' } },
        },
      };
    });
    const onePass = await verifyLog(archive, { jobs: 1 });
    const inRanges = await verifyLog(archive, { jobs: 2, minRangeEvents: 1_000 });
    expect(onePass.divergence).to.equal(undefined);
    expect(inRanges.counts).to.deep.equal(onePass.counts);
    expect(inRanges.ranges).to.equal(1);
    // The untouched archive splits at the same place.
    expect((await verifyLog(cluster.archive, { jobs: 2, minRangeEvents: 1_000 })).ranges).to.equal(
      2,
    );
  });

  /** The `CallPlaced` at `seq` records a package placement would not choose: no state changes. */
  const forgedPackages = (seq: number) => (event: StoredEvent['event']) =>
    event.seq === seq && event.type === 'CallPlaced'
      ? { ...event, packages: [...event.packages, 'forged==1.0'] }
      : event;

  it("a divergence in the decision still open at a seam or at the log's end is found, with the counts of one pass", async () => {
    // Each call forged is the last decision before a seam (the main thread's, a thread's: the
    // seams of three ranges are this archive's second and third files), or the last of the log
    // (a thread's).
    const ranges = { jobs: 3, minRangeEvents: 1_000 };
    const entries = ArchiveDirectory.open(cluster.archive).entries();
    const seams = [entries[1]!.fromSeq, entries[2]!.fromSeq];
    expect((await verifyLog(cluster.archive, ranges)).seams).to.deep.equal(seams);
    const cases: { file: number; seq: number; files?: number }[] = [
      { file: 0, seq: seams[0]! - 1 },
      { file: 1, seq: seams[1]! - 1 },
      { file: 2, seq: entries[2]!.toSeq, files: 3 },
    ];
    for (const { file, seq, files } of cases) {
      const copy = await rewrittenArchive(cluster.archive, file, forgedPackages(seq));
      const paths =
        files === undefined
          ? copy
          : ArchiveDirectory.open(copy)
              .entries()
              .slice(0, files)
              .map((entry) => entry.path);
      const onePass = await verifyLog(paths, { jobs: 1 });
      const inRanges = await verifyLog(paths, ranges);
      expect(onePass.divergence?.seq, `forged at ${seq}`).to.equal(seq - 1);
      expect(inRanges.divergence?.seq, `forged at ${seq}`).to.equal(seq - 1);
      expect(inRanges.counts, `forged at ${seq}`).to.deep.equal(onePass.counts);
      expect(inRanges.ranges).to.equal(1);
    }
  });

  it('a snapshot the source hands over at a seam (a live log that holds what its archive holds) is folded, as one pass folds it', async () => {
    const first = ArchiveDirectory.open(cluster.archive).entries()[0]!.path;
    const origin = (await ArchiveFile.open(first)).header.origin;
    const dir = join(tempDir('overlap-'), 'log');
    const log = EventLog.open(dir, { projection: clusterProjection });
    const stored: StoredEvent[] = [];
    let forged = false;
    for await (const line of readJsonl(cluster.full)) {
      const { event } = line;
      if (event.type !== 'Snapshot' || event.seq <= 1_502 || forged) {
        stored.push(line);
        continue;
      }
      // Its first snapshot after the archive file: not the fold's (every worker has 1 byte).
      forged = true;
      const workers = Object.fromEntries(
        Object.entries(event.state.workers as Record<string, Record<string, unknown>>).map(
          ([id, worker]) => [id, { ...worker, memoryTotal: 1 }],
        ),
      );
      const changed = { ...event, state: { ...event.state, workers } };
      stored.push({ event: changed, text: JSON.stringify(changed) });
    }
    log.appendStored(stored);
    await log.flushed();
    // The live log of the archive's own log.
    (log as unknown as { meta: { putSync(key: string, value: unknown): void } }).meta.putSync(
      'origin',
      origin,
    );
    await log.close();
    const paths = [first, dir];
    const onePass = await verifyLog(paths, { jobs: 1 });
    const inRanges = await verifyLog(paths, { jobs: 5, minRangeEvents: 1_000 });
    expect(onePass.divergence ?? onePass.otherDivergence, 'one pass folds the forged snapshot').to
      .not.be.undefined;
    expect(inRanges.divergence?.seq).to.equal(onePass.divergence?.seq);
    expect(inRanges.otherDivergence?.result.seq).to.equal(onePass.otherDivergence?.result.seq);
    expect(inRanges.counts).to.deep.equal(onePass.counts);
  });

  it('the first decision after a snapshot is made at the seq the router made it at, in one pass as in a range', async () => {
    // A pinned session whose container is reported gone right after a snapshot: its expiry
    // records the seq of the decision that caused it.
    const dir = join(tempDir('after-snapshot-'), 'log');
    const clock = testClock();
    const log = EventLog.open<ClusterState>(dir, {
      projection: clusterProjection,
      clock: clock.now,
      snapshotEvery: 3_000,
    });
    log.append([
      started(),
      registered('w1'),
      container('w1', 'c1', 'ready'),
      pinned('s1', 'w1', 'c1'),
    ]);
    let snapshotAt: number | undefined;
    while (snapshotAt === undefined) {
      clock.advance(1_000);
      const before = log.lastSeq;
      log.append(utilization('w1'));
      if (log.lastSeq === before + 2) snapshotAt = log.lastSeq;
    }
    clock.advance(1_000);
    const made = decide('containerReport', log.state, {
      workerId: 'w1',
      containerId: 'c1',
      state: 'removed',
      checkpointId: null,
      instanceId: null,
      reportSeq: null,
    }).events;
    expect(made.map((event) => event.type)).to.include('SessionExpired');
    log.append(made, 'report:w1');
    for (let i = 0; i < 2_995; i += 1) {
      clock.advance(1_000);
      log.append(utilization('w1'));
    }
    await log.flushed();
    await log.close();
    const onePass = await verifyLog(dir, { jobs: 1 });
    const inRanges = await verifyLog(dir, { jobs: 2, minRangeEvents: 1_500 });
    expect(onePass.otherDivergence?.result.divergence ?? null).to.equal(null);
    expect(onePass.divergence).to.equal(undefined);
    expect(inRanges.ranges).to.equal(2);
    expect(inRanges.counts).to.deep.equal(onePass.counts);
  });

  it('a live log written while it is verified is verified as it was when the verify started, in ranges as in one pass', async () => {
    const run = async (jobs: number) => {
      const dir = join(tempDir('growing-'), 'log');
      cpSync(cluster.log, dir, { recursive: true });
      const writer = EventLog.open(dir, { projection: clusterProjection });
      const verifying = verifyLog(dir, { jobs, minRangeEvents: 1_000 });
      // The router goes on: a call placed where placement would not place it.
      writer.append(
        [requested('req-later'), placed('req-later', 'w1', { packages: ['forged==1'] })],
        'call:req-later',
      );
      await writer.flushed();
      const outcome = await verifying;
      await writer.close();
      return outcome;
    };
    const onePass = await run(1);
    const inRanges = await run(2);
    // The forged call came after the verify started: neither reads it.
    expect(onePass.divergence, 'one pass').to.equal(undefined);
    expect(inRanges.divergence, 'in ranges').to.equal(undefined);
    expect(inRanges.ranges).to.equal(2);
    expect(inRanges.counts).to.deep.equal(onePass.counts);
  });

  it('by default leaves a core free: at most the cores less one ranges (one pass on 2 cores)', async () => {
    const paths = [cluster.archive, cluster.log];
    const byDefault = await verifyLog(paths, { minRangeEvents: 1_000 });
    expect(byDefault.ranges).to.be.at.most(Math.max(1, availableParallelism() - 1));
    expect(byDefault.counts).to.deep.equal((await verifyLog(paths, { jobs: 1 })).counts);
  });

  it('a log too short for two ranges, or one given with --skip-damaged, is verified in one pass', async () => {
    expect((await verifyLog(cluster.log, { jobs: 8 })).ranges).to.equal(1);
    const split = { jobs: 2, minRangeEvents: 1_000 };
    expect((await verifyLog(cluster.archive, { ...split, skipDamaged: true })).ranges).to.equal(1);
  });
});

describe('the seam between two ranges', () => {
  const call = (requestId: string): CallToPlace => ({
    requestId,
    sessionId: null,
    tenantId: null,
    retryOf: null,
    demand: demand(),
  });

  it('a map records the reads of keys it never wrote, seeded or missing, and holds only when the range before agrees', () => {
    const map = new SeamMap<CallToPlace>(true);
    map.seed('seeded', call('seeded'));
    expect(map.get('seeded')).to.deep.equal(call('seeded'));
    expect(map.get('missing')).to.equal(undefined);
    map.set('own', call('own'));
    expect(map.get('own')).to.deep.equal(call('own'));
    map.delete('gone');
    expect(map.has('gone')).to.equal(false);
    expect(map.reads.map((read) => read.key)).to.deep.equal(['seeded', 'missing']);
    const before = new Map([['seeded', call('seeded')]]);
    expect(seamHolds(before, map.reads)).to.equal(true);
    // The range before held the call the range read as missing: the seam does not hold.
    expect(seamHolds(new Map([...before, ['missing', call('missing')]]), map.reads)).to.equal(
      false,
    );
    expect(seamHolds(new Map(), map.reads)).to.equal(false);
    // The map the next range is checked against: the one before, with what this one wrote.
    const after = joined(new Map([['gone', call('gone')]]), map.written);
    expect([...after.keys()]).to.deep.equal(['own']);
    // After a clear (a new router) nothing before matters: no read is recorded.
    map.clear();
    expect(map.get('seeded')).to.equal(undefined);
    expect(map.reads).to.have.length(2);
    expect(joined(before, map.written).size).to.equal(0);
    // A map that does not track records nothing.
    const plain = new SeamMap<CallToPlace>(false);
    plain.get('x');
    expect(plain.reads).to.have.length(0);
  });

  it('the digest tells apart two states whose calls to forget are remembered in another order', () => {
    // Request "7" before "5": a snapshot's record lists integer-like keys first, so the state
    // restored from it remembers "5" first, and forgetting (which stops at the first call not
    // due) would take them in another order.
    const at = (ms: number) => new Date(START_MS + ms).toISOString();
    let fold: ClusterState = initialState();
    const events = [
      started(),
      requested('7', { tenantId: 't' }),
      requested('5', { tenantId: 't' }),
    ];
    events.forEach((event, index) => {
      fold = applyInPlace(fold, {
        seq: index + 1,
        at: at(index * 1_000),
        cause: null,
        ...event,
      });
    });
    const snapshot = {
      seq: 4,
      at: at(2_000),
      cause: null,
      type: 'Snapshot',
      state: snapshotOf(fold),
    };
    const restored = applyInPlace(initialState(), snapshot as never);
    expect([...restored.routing.calls.keys()]).to.not.deep.equal([...fold.routing.calls.keys()]);
    expect(stateDigest(restored)).to.not.equal(stateDigest(fold));
    // The same state, however it was made, has one digest.
    expect(stateDigest(applyInPlace(initialState(), snapshot as never))).to.equal(
      stateDigest(restored),
    );
  });

  it('the join gives up at the first range that cannot be joined, or at any thread that fails, without waiting for the others', async () => {
    const tally = new VerifyTally('recorded');
    const range = (unusable: string | null): RangeResult => ({
      counts: { checked: 5, unrecorded: 0, others: 7, undecidedDials: 0 },
      unusable,
      startDigest: stateDigest(tally.replayer.state),
      startVersion: tally.replayer.seam.recordedVersion,
      endDigest: stateDigest(tally.replayer.state),
      endVersion: tally.replayer.seam.recordedVersion,
      calls: { reads: [], writes: undefined },
      placements: { reads: [], writes: undefined },
    });
    const thread = (result: Promise<RangeResult>): RangeThread => ({ result, stop: () => {} });
    // A later range still running (it never ends here): the first range's divergence decides.
    const running = new Promise<RangeResult>(() => {});
    const diverged = thread(Promise.resolve(range('a decision diverged at seq 7')));
    expect(await joinRanges(tally, [diverged, thread(running)])).to.equal(false);
    const failed = () => thread(Promise.reject(new Error('a verify thread exited with status 1')));
    expect(await joinRanges(tally, [failed(), thread(running)])).to.equal(false);
    // A later range's thread failed while the first still runs: no need to wait for the first.
    expect(await joinRanges(tally, [thread(running), failed()])).to.equal(false);
    expect(tally.counts.checked).to.equal(0);
    // Every range usable and each starting where the one before ended: the counts add up.
    const usable = [thread(Promise.resolve(range(null))), thread(Promise.resolve(range(null)))];
    expect(await joinRanges(tally, usable)).to.equal(true);
    expect(tally.counts).to.deep.include({ checked: 10, others: 14 });
  });

  it('a replayer that starts inside a log records a failed dial of a call it never saw requested', () => {
    const replayer = new Replayer({ startsInside: true });
    replayer.push({
      seq: 7,
      at: '2026-11-01T00:00:00.000Z',
      cause: 'dial:req-1',
      type: 'CallDialFailed',
      requestId: 'req-1',
      workerId: 'w-1',
      error: 'connection refused',
    } as never);
    replayer.end();
    expect(replayer.undecidedDials).to.equal(1);
    expect(replayer.seam.calls.reads.map((read) => read.key)).to.deep.equal(['req-1']);
  });
});
