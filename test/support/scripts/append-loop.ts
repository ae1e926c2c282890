/**
 * A writer for cross-process tests: opens the log in argv[2] and appends batches of argv[3]
 * events forever (or argv[4] batches), printing `durable <lastSeq>` after each batch's durability
 * promise resolves and `committed <lastSeq>` after its commit. Prints `open` once the lock is held.
 * With argv[5] `hold`, it prints `holding` after the last batch and keeps the log open until killed.
 */
import { EventLog } from '../../../src/events/index.js';

const [dir, batchText = '3', batchesText = 'Infinity', then] = process.argv.slice(2);
if (!dir) throw new Error('usage: append-loop DIR [BATCH] [BATCHES]');
const batch = Number(batchText);
const batches = Number(batchesText);
const log = EventLog.open(dir);
process.stdout.write('open\n');
for (let round = 0; round < batches; round += 1) {
  const result = log.append(
    Array.from({ length: batch }, (_, i) => ({
      type: 'WorkerLeaving' as const,
      workerId: `w${round}-${i}`,
    })),
  );
  const last = result.events.at(-1)?.seq;
  await result.committed;
  process.stdout.write(`committed ${last}\n`);
  await result.durable;
  process.stdout.write(`durable ${last}\n`);
}
if (then === 'hold') {
  process.stdout.write('holding\n');
  setInterval(() => undefined, 60_000);
} else {
  await log.close();
  process.stdout.write('closed\n');
}
