import { expect } from 'chai';
import { readLog } from '../support/router/harness.js';
import { readLiveLog } from '../support/live-log.js';
import { lockFile } from '../support/lmdb-lock.js';
import { runScript } from '../support/processes.js';
import { cleanTempDirs, tempDir } from '../support/temp.js';

describe('reading a log another process writes (test/support/live-log.ts)', function () {
  this.timeout(20_000);
  afterEach(cleanTempDirs);

  it('given a kept handle and a writer killed before it published its last commit, when the log is read, then the read sees that commit', async () => {
    // Given: a writer in another process committed two batches, read through the kept handle.
    const dir = tempDir();
    const writer = runScript('scripts/append-loop.ts', [dir, '5', '2', 'hold']);
    await writer.waitFor(/^holding$/);
    expect(readLiveLog(dir)?.map((e) => e.seq)).to.have.length(10);
    // The lock file as a writer killed between writing its last commit and publishing that
    // commit's transaction id leaves it: one id behind.
    const lock = lockFile(dir);
    lock.setTxnid(lock.txnid() - 1n);
    lock.close();
    writer.process.kill('SIGKILL');
    await writer.exited;
    // When: the log is read, the writer gone. Then: every commit on disk is read.
    expect(readLog(dir).map((e) => e.seq)).to.deep.equal([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
  });
});
