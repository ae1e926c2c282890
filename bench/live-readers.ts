/**
 * `npm run bench -- live-readers [--events N]`: events lost from an LMDB log while two other
 * processes read it, each case a writer process appending N events (default 300,000) in bursts
 * of 50 (2 ms of work before each) beside two reader processes reading every key every 20 ms:
 *
 * - `rawReopening` (the baseline): lmdb-js directly, readers opening and closing the log each
 *   time: LMDB forgets some commits (see `src/events/lmdb/recent-writes.ts`);
 * - `rawHeld`: lmdb-js directly, readers keeping one handle open;
 * - `eventLogReopening`: readie's EventLog, readers opening and closing: its check after each
 *   commit stores again what LMDB forgot (`repaired`).
 *
 * `missing` counts the seqs absent between 1 and the last one written, read once every process
 * is gone; each case's figure stands beside the baseline's.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { open } from 'lmdb';
import { withTempDir } from './support.js';

const flag = process.argv.indexOf('--events');
const EVENTS = flag > 0 ? Number(process.argv[flag + 1]) : 300_000;

/** Runs a bench script; resolves with its last stdout line as JSON. */
function script(
  name: string,
  args: readonly string[],
): { done: Promise<unknown>; kill: () => void } {
  const path = fileURLToPath(new URL(`./scripts/${name}`, import.meta.url));
  const child = spawn(process.execPath, ['--import', 'tsx', path, ...args], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
  const done = new Promise<unknown>((resolve) =>
    child.on('exit', () => {
      const last = out.trim().split('\n').at(-1) ?? '';
      try {
        resolve(JSON.parse(last));
      } catch {
        resolve({ exited: child.exitCode, signal: child.signalCode, out: last });
      }
    }),
  );
  return { done, kill: () => child.kill('SIGTERM') };
}

/** The seqs missing from 1 to `written` in the log of `dir`. */
function missing(dir: string, written: number): number {
  const root = open({ path: join(dir, 'events.mdb'), readOnly: true, maxDbs: 5 });
  try {
    const events = root.openDB<Buffer, number>({ name: 'events', encoding: 'binary' });
    let present = 0;
    for (const key of events.getKeys({ start: 1, end: written + 1 })) if (key >= 1) present += 1;
    return written - present;
  } finally {
    void root.close();
  }
}

async function scenario(writer: 'raw' | 'eventlog', readers: 'reopen' | 'held') {
  return withTempDir(async (dir) => {
    const log = join(dir, 'log');
    const write = script('live-log-writer.ts', [log, String(EVENTS), writer]);
    // The readers start once the writer has created the log, and stop when it is done.
    while (!existsSync(join(log, 'events.mdb-lock'))) await new Promise((r) => setTimeout(r, 50));
    const reading = [0, 1].map(() => script('live-log-reader.ts', [log, '600000', readers]));
    const written = await write.done;
    for (const reader of reading) reader.kill();
    await Promise.all(reading.map((r) => r.done));
    return { writer: written, missing: missing(log, EVENTS) };
  });
}

/** The benchmark. */
export async function run(): Promise<unknown> {
  const rawReopening = await scenario('raw', 'reopen');
  const rawHeld = await scenario('raw', 'held');
  const eventLogReopening = await scenario('eventlog', 'reopen');
  return {
    events: EVENTS,
    rawReopening,
    rawHeld: { ...rawHeld, baselineMissing: rawReopening.missing },
    eventLogReopening: { ...eventLogReopening, baselineMissing: rawReopening.missing },
  };
}
