/**
 * The writer of `npm run bench -- live-readers`: appends argv[3] events to the log in argv[2] in
 * bursts of 50, one a turn after 2 ms of work (as a router folds what it appends), through lmdb-js directly
 * (`raw`, what readie's EventLog stores without its check) or through the EventLog (`eventlog`).
 * Prints one JSON line: what it wrote, the commits it saw fail, the lost commits it stored again.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { open } from 'lmdb';
import { EventLog, type NewEvent } from '../../src/events/index.js';

const [dir = '', totalText = '100000', mode = 'eventlog'] = process.argv.slice(2);
const total = Number(totalText);
const BURST = 50;
let failed = 0;
let repaired = 0;

/** The work a router does between appends (folding, deciding): 2 ms of CPU. */
function work(): void {
  const start = Date.now();
  while (Date.now() - start < 2) {
    // Busy, as a fold is.
  }
}

async function raw(): Promise<void> {
  mkdirSync(dir, { recursive: true });
  const root = open({ path: join(dir, 'events.mdb'), maxDbs: 5 });
  const events = root.openDB<Buffer, number>({ name: 'events', encoding: 'binary' });
  const value = Buffer.alloc(60, 7);
  for (let n = 1; n <= total;) {
    work();
    for (let i = 0; i < BURST && n <= total; i += 1, n += 1) {
      events.put(n, value).catch(() => (failed += 1));
    }
    await new Promise((r) => setImmediate(r));
  }
  await root.close();
}

async function eventlog(): Promise<void> {
  const log = EventLog.open(dir, { onLostCommit: (lost) => (repaired += lost.count) });
  const leaving = (n: number): NewEvent => ({ type: 'WorkerLeaving', workerId: `w${n % 97}` });
  for (let n = 1; n <= total;) {
    work();
    const count = Math.min(BURST, total - n + 1);
    log
      .append(Array.from({ length: count }, (_, i) => leaving(n + i)))
      .committed.catch(() => (failed += 1));
    n += count;
    await new Promise((r) => setImmediate(r));
  }
  await log.close();
}

await (mode === 'raw' ? raw() : eventlog());
process.stdout.write(`${JSON.stringify({ written: total, failed, repaired })}\n`);
