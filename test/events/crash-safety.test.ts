import { expect } from 'chai';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import {
  ArchiveDirectory,
  EventLog,
  parseArchiveFileName,
  type StoredEvent,
} from '../../src/events/index.js';
import { clusterProjection, type ClusterState } from '../../src/projections/index.js';
import {
  appendHistory,
  ARCHIVE_STEPS,
  archivedEvents,
  DAY,
  HOUR,
  liveEvents,
  testClock,
} from '../support/archive.js';
import { runScript } from '../support/processes.js';
import { cleanTempDirs, tempDir } from '../support/temp.js';

describe('EventLog crash safety', () => {
  afterEach(cleanTempDirs);

  it('survives SIGKILL at a random moment: readable, no seq gap, every durable append present', async function () {
    // Four writer processes, each compiled by tsx as it starts: slow on a loaded machine.
    this.timeout(120_000);
    const dir = tempDir();
    let previousLast = 0;
    for (let round = 0; round < 4; round += 1) {
      const batch = 1 + Math.floor(Math.random() * 5);
      const writer = runScript('scripts/append-loop.ts', [dir, String(batch)]);
      await writer.waitFor(/^durable \d+$/);
      await new Promise((resolve) => setTimeout(resolve, 20 + Math.random() * 400));
      writer.process.kill('SIGKILL');
      const { signal } = await writer.exited;
      expect(signal).to.equal('SIGKILL');
      const durable = writer.lines
        .filter((line) => line.startsWith('durable '))
        .map((line) => Number(line.split(' ')[1]));
      const promised = Math.max(...durable);
      expect(promised).to.be.greaterThan(previousLast);

      const log = EventLog.open(dir);
      const seqs = [...log.read()].map((event) => event.seq);
      expect(seqs[0]).to.equal(1);
      expect(seqs.at(-1)).to.equal(log.lastSeq);
      expect(
        seqs.every((seq, i) => seq === i + 1),
        'no gap',
      ).to.equal(true);
      expect(log.lastSeq, `round ${round}: durable up to ${promised}`).to.be.at.least(promised);
      previousLast = log.lastSeq;
      await log.close();
    }
  });
});

describe('log retention crash safety (LMDB)', function () {
  this.timeout(120_000);
  afterEach(cleanTempDirs);

  /** Every event is live or in a whole archive file, with the text it was written with. */
  async function checkNothingLost(
    dir: string,
    archiveDir: string,
    original: readonly StoredEvent[],
  ) {
    for (const name of readdirSync(archiveDir)) {
      if (!name.startsWith('.')) expect(parseArchiveFileName(name), name).to.not.equal(undefined);
    }
    const archived = await archivedEvents(archiveDir);
    const log = EventLog.open(dir, { readOnly: true });
    try {
      const live = await liveEvents(log);
      const bySeq = new Map<number, string>();
      for (const stored of [...archived, ...live]) bySeq.set(stored.event.seq, stored.text);
      for (const stored of original) {
        expect(bySeq.get(stored.event.seq), `seq ${stored.event.seq}`).to.equal(stored.text);
      }
      return { live, archived };
    } finally {
      await log.close();
    }
  }

  it('a SIGKILL at each step of the archive sequence leaves every segment live or in a verified file, and the next pass finishes it', async () => {
    const clock = testClock();
    const dir = tempDir();
    const archiveDir = join(tempDir(), 'archive');
    const writer = EventLog.open<ClusterState>(dir, {
      projection: clusterProjection,
      clock: clock.now,
      snapshotEvery: 40,
    });
    await appendHistory(writer, clock, { hours: 48 });
    const original = await liveEvents(writer);
    await writer.close();
    for (const step of ARCHIVE_STEPS) {
      const child = runScript('scripts/archive-crash.ts', [
        dir,
        archiveDir,
        step,
        String(clock.now()),
      ]);
      const { signal } = await child.exited;
      expect(signal, `${step}: ${child.stderr()}`).to.equal('SIGKILL');
      expect(child.lines.at(-1), step).to.match(new RegExp(`^step ${step} `));
      await checkNothingLost(dir, archiveDir, original);
    }
    const last = runScript('scripts/archive-crash.ts', [
      dir,
      archiveDir,
      'none',
      String(clock.now()),
    ]);
    expect((await last.exited).code, last.stderr()).to.equal(0);
    const { live } = await checkNothingLost(dir, archiveDir, original);
    // Finished: no leftovers, each file logged exactly once, the live log starts at a snapshot
    // about a day old, and nothing before it is live.
    expect(readdirSync(archiveDir).filter((name) => name.startsWith('.'))).to.deep.equal([]);
    const files = ArchiveDirectory.open(archiveDir).entries();
    const logged = live
      .map((s) => s.event)
      .filter((e) => e.type === 'LogSegmentArchived')
      .map((e) => e.type === 'LogSegmentArchived' && e.file);
    expect(logged).to.deep.equal(files.map((f) => f.file));
    expect(live[0]?.event.type).to.equal('Snapshot');
    expect(live[0]?.event.seq).to.equal((files.at(-1)?.toSeq ?? 0) + 1);
    expect(Date.parse(live[0]?.event.at ?? '')).to.be.above(clock.now() - DAY - 2 * HOUR);
  });
});
