/** `replay import <file.jsonl> <lmdb-dir>`: load a JSONL log into an LMDB log, byte for byte. */
import { EventLog, readJsonl, type JsonlEvent } from '../../src/events/index.js';
import { ReplayInputError } from '../io/replay-input-error.js';
import { existsSync, statSync } from 'node:fs';
import { out } from './options.js';

const BATCH = 10_000;

/** Runs `replay import`; resolves to the exit status. */
export async function importCommand(file: string, dir: string): Promise<number> {
  if (!existsSync(file) || !statSync(file).isFile())
    throw new ReplayInputError(`${file}: no such file`);
  const log = EventLog.open(dir);
  let count = 0;
  let first: number | undefined;
  try {
    if (log.firstSeq !== undefined) {
      throw new ReplayInputError(
        `${dir}: already holds events (seq ${log.firstSeq} to ${log.lastSeq}); import into an empty directory`,
      );
    }
    let batch: JsonlEvent[] = [];
    for await (const stored of readJsonl(file)) {
      first ??= stored.event.seq;
      batch.push(stored);
      if (batch.length >= BATCH) {
        await log.appendStored(batch).committed;
        count += batch.length;
        batch = [];
      }
    }
    if (batch.length > 0) await log.appendStored(batch).committed;
    count += batch.length;
    await log.flushed();
  } finally {
    await log.close();
  }
  out(
    count === 0
      ? `imported nothing: ${file} holds no events`
      : `imported ${count} events (seq ${first} to ${(first ?? 0) + count - 1}) into ${dir}`,
  );
  return 0;
}
