/**
 * `replay verify` in ranges: the log cut at snapshots, each range after the first verified in a
 * worker thread of its own, joined at the seams. The answer is always one pass's: the same
 * counts when every seam holds; when one does not (a divergence in a later range, a snapshot that
 * is not the state the fold reached, a read of a call the range never saw), the verify goes on in
 * one pass and reports what one pass reports.
 */
import { expect } from 'chai';
import { cpSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import {
  ArchiveDirectory,
  ArchiveFile,
  ArchiveWriter,
  type StoredEvent,
} from '../../src/events/index.js';
import type { CallToPlace } from '../../src/core/placement/index.js';
import { verifyLog, type VerifyLogOptions } from '../../replay/commands/verify-log.js';
import { Replayer } from '../../replay/engine/replayer.js';
import { joined, SeamMap, seamHolds } from '../../replay/engine/seam-map.js';
import { archivedCluster } from '../support/archive.js';
import { cleanTempDirs, tempDir } from '../support/temp.js';

/** Ranges of at least 1,000 events (the command's own floor is 100,000). */
const SMALL_RANGES: VerifyLogOptions = { jobs: 4, minRangeEvents: 1_000 };

/**
 * A copy of `archive` whose file `index` is written again with `change` applied to each of its
 * events (the same range and origin, a checksum of its own): what a damaged or forged file that
 * still reads would hold.
 */
async function rewritten(
  archive: string,
  index: number,
  change: (event: StoredEvent['event']) => StoredEvent['event'],
): Promise<string> {
  const copy = join(tempDir('rewritten-'), 'archive');
  cpSync(archive, copy, { recursive: true });
  const entry = ArchiveDirectory.open(copy).entries()[index]!;
  const file = await ArchiveFile.open(entry.path);
  const writer = new ArchiveWriter(file.header.origin);
  for await (const { event } of file.readStored()) {
    writer.add({ event: change(event) } as StoredEvent);
  }
  const scratch = tempDir('rewrite-');
  const written = await writer.write(scratch);
  cpSync(written.path, entry.path);
  return copy;
}

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
    const archive = await rewritten(cluster.archive, files.length - 1, (event) => {
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
    const archive = await rewritten(cluster.archive, 1, (event) => {
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

  it('a log too short for two ranges, or one given with --skip-damaged, is verified in one pass', async () => {
    expect((await verifyLog(cluster.log, { jobs: 8 })).ranges).to.equal(1);
    const split = { jobs: 2, minRangeEvents: 1_000 };
    expect((await verifyLog(cluster.archive, { ...split, skipDamaged: true })).ranges).to.equal(1);
    expect(readdirSync(cluster.archive).length).to.be.at.least(3);
  });
});

describe('the seam between two ranges', () => {
  const call = (requestId: string): CallToPlace => ({
    requestId,
    sessionId: null,
    tenantId: null,
    retryOf: null,
    demand: {
      memory: null,
      gpuMemory: null,
      gpu: null,
      disableOptimizedExecution: null,
      checkpointId: null,
      imports: null,
      packages: null,
      pinned: null,
    },
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
