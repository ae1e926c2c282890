/**
 * A reader of `npm run bench -- live-readers`: for argv[3] ms reads every key of the log in
 * argv[2] every 20 ms, opening and closing it each time (`reopen`) or through one handle kept
 * open (`held`). Prints one JSON line: reads done, opens or reads that failed.
 */
import { join } from 'node:path';
import { open, type RootDatabase } from 'lmdb';

const [dir = '', msText = '10000', mode = 'reopen'] = process.argv.slice(2);
const until = Date.now() + Number(msText);
let reads = 0;
let errors = 0;
let held: RootDatabase | undefined;

const openRoot = (): RootDatabase =>
  open({ path: join(dir, 'events.mdb'), readOnly: true, maxDbs: 5 });

while (Date.now() < until) {
  try {
    const root = mode === 'held' ? (held ??= openRoot()) : openRoot();
    if (mode === 'held') root.resetReadTxn();
    const events = root.openDB<Buffer, number>({ name: 'events', encoding: 'binary' });
    for (const _ of events.getKeys()) {
      // Every key is read.
    }
    if (mode !== 'held') await root.close();
    reads += 1;
  } catch {
    errors += 1;
  }
  await new Promise((r) => setTimeout(r, 20));
}
await held?.close();
process.stdout.write(`${JSON.stringify({ reads, errors })}\n`);
