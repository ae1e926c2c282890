import { expect } from 'chai';
import { EventLog, type LostCommit, type NewEvent } from '../../src/events/index.js';
import { lockFile } from '../support/lmdb-lock.js';
import { cleanTempDirs, tempDir } from '../support/temp.js';

const leaving = (n: number): NewEvent => ({ type: 'WorkerLeaving', workerId: `w${n}` });
const batch = (from: number, count: number): NewEvent[] =>
  Array.from({ length: count }, (_, i) => leaving(from + i));

/** The seqs missing between the first and the last of a log's events. */
function holes(seqs: readonly number[]): number[] {
  const missing: number[] = [];
  for (let i = 1; i < seqs.length; i += 1) {
    for (let seq = (seqs[i - 1] as number) + 1; seq < (seqs[i] as number); seq += 1) {
      missing.push(seq);
    }
  }
  return missing;
}

function storedSeqs(dir: string): number[] {
  const log = EventLog.open(dir, { readOnly: true });
  try {
    return [...log.readStored(0, Number.MAX_SAFE_INTEGER)].map((s) => s.event.seq);
  } catch {
    // A log with a hole refuses to be read in order: list its keys instead.
    return [...(log as unknown as { events: { getKeys(): Iterable<number> } }).events.getKeys()];
  } finally {
    void log.close();
  }
}

describe('EventLog: a commit LMDB forgets is not lost', function () {
  this.timeout(20_000);
  afterEach(cleanTempDirs);

  it('given another process set the shared transaction id back (as its open does), when the writer commits again, then the forgotten batch is stored again and reported', async () => {
    // Given: two committed batches, then the lock file's transaction id set back by one commit,
    // which is what a read-only open racing a commit does in lmdb-js 3.5's LMDB.
    const dir = tempDir();
    const reports: LostCommit[] = [];
    const log = EventLog.open(dir, { onLostCommit: (lost) => reports.push(lost) });
    const lock = lockFile(dir);
    try {
      await log.append(batch(1, 5)).committed;
      const before = lock.txnid();
      await log.append(batch(6, 5)).committed;
      lock.setTxnid(before);
      // When: the writer commits its next batch (built on the forgotten commit's parent).
      await log.append(batch(11, 5)).committed;
      await log.append(batch(16, 1)).committed;
    } finally {
      lock.close();
      await log.close();
    }
    // Then: nothing is missing, and the writer said what it stored again.
    const seqs = storedSeqs(dir);
    expect(holes(seqs)).to.deep.equal([]);
    expect(seqs).to.have.length(16);
    expect(reports.map((r) => [r.fromSeq, r.toSeq, r.count])).to.deep.equal([[6, 10, 5]]);
    expect(reports[0]?.dir).to.equal(dir);
  });

  it('given a forgotten commit of 5,000 events, when the writer commits again, then all of them are stored again', async () => {
    // Given: one commit of 5,000 events, then forgotten.
    const dir = tempDir();
    const reports: LostCommit[] = [];
    const log = EventLog.open(dir, { onLostCommit: (lost) => reports.push(lost) });
    const lock = lockFile(dir);
    try {
      await log.append(batch(1, 1)).committed;
      const before = lock.txnid();
      await log.append(batch(2, 5000)).committed;
      lock.setTxnid(before);
      // When: the writer commits again.
      await log.append(batch(5002, 1)).committed;
      await log.append(batch(5003, 1)).committed;
    } finally {
      lock.close();
      await log.close();
    }
    // Then: nothing is missing.
    const seqs = storedSeqs(dir);
    expect(holes(seqs)).to.deep.equal([]);
    expect(seqs).to.have.length(5003);
    expect(reports.map((r) => [r.fromSeq, r.toSeq, r.count])).to.deep.equal([[2, 5001, 5000]]);
  });

  it('given a committed event gone from before the events the writer keeps, when it commits again, then it stops writing and says why', async () => {
    // Given: three checked commits, then the newest event the writer no longer keeps (its
    // checks covered it) removed behind its back.
    const dir = tempDir();
    const log = EventLog.open(dir, { onLostCommit: () => undefined });
    try {
      await log.append(batch(1, 5)).committed;
      await log.append(batch(6, 1)).committed;
      await log.append(batch(7, 1)).committed;
      (log as unknown as { events: { removeSync(key: number): void } }).events.removeSync(6);
      // When: the writer commits again.
      await log.append(batch(8, 1)).committed;
      await new Promise((r) => setImmediate(r));
      // Then: the next append is refused, naming the log and the loss.
      expect(() => log.append(batch(9, 1))).to.throw(
        /failed to write earlier: .*lost committed events up to seq 6, which this writer no longer holds/,
      );
    } finally {
      await log.close();
    }
  });
});
