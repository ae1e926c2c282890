import { expect } from 'chai';
import { EventLog } from '../../src/events/index.js';
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
