/**
 * `replay import <file.jsonl> <log>`: load a JSONL log into a new LMDB log or JetStream stream,
 * byte for byte. A new stream is created for the file's first seq (its seq offset), so a range
 * exported from mid-log keeps its seqs.
 */
import {
  EventLogError,
  isJetStreamLocation,
  openEventLog,
  readJsonl,
  type JsonlEvent,
} from '../../src/events/index.js';
import { ReplayInputError } from '../io/replay-input-error.js';
import { existsSync, statSync } from 'node:fs';
import { out } from './options.js';

const BATCH = 10_000;

/** Runs `replay import`; resolves to the exit status. */
export async function importCommand(file: string, dir: string): Promise<number> {
  if (!existsSync(file) || !statSync(file).isFile())
    throw new ReplayInputError(`${file}: no such file`);
  let first: number | undefined;
  if (isJetStreamLocation(dir)) {
    for await (const stored of readJsonl(file)) {
      first = stored.event.seq;
      break;
    }
  }
  const log = await openEventLog(dir, { seqOffset: (first ?? 1) - 1 }).catch((error: unknown) => {
    throw error instanceof EventLogError ? new ReplayInputError(error.message) : error;
  });
  let count = 0;
  first = undefined;
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
