/**
 * `replay export <log>`: a range of an LMDB or JetStream log as JSONL. A range that starts after the
 * log's first event begins with a `Snapshot` of the state before it, so it stands alone.
 */
import {
  validateEvent,
  writeJsonl,
  encodeEvent,
  type StoredEvent,
} from '../../src/events/index.js';
import { fold, snapshotOf } from '../../src/projections/index.js';
import { openLog } from '../io/log-source.js';
import { ReplayInputError } from '../io/replay-input-error.js';
import { parseSeq } from './options.js';

/** Options of `replay export`. */
export interface ExportOptions {
  readonly from?: string;
  readonly to?: string;
  readonly output?: string;
}

/** Runs `replay export`; resolves to the exit status. */
export async function exportCommand(dir: string, options: ExportOptions): Promise<number> {
  const log = await openLog(dir);
  try {
    const first = log.firstSeq;
    if (first === undefined) throw new ReplayInputError(`${dir}: the log is empty`);
    const from = options.from === undefined ? first : parseSeq('--from', options.from);
    const to = options.to === undefined ? log.lastSeq : parseSeq('--to', options.to);
    if (from < first || from > log.lastSeq) {
      throw new ReplayInputError(`--from ${from}: the log holds seq ${first} to ${log.lastSeq}`);
    }
    if (to < from) throw new ReplayInputError(`--to ${to} is before --from ${from}`);
    const lines: StoredEvent[] = [];
    if (from > first) {
      const start = (await log.snapshotAtOrBefore(from - 1)) ?? first;
      const state = fold(await collect(log.read(start, from - 1)));
      const [before] = await collect(log.read(from - 1, from - 1));
      const snapshot = validateEvent({
        seq: from - 1,
        at: before?.at ?? '',
        type: 'Snapshot',
        schemaVersion: state.schemaVersion,
        state: snapshotOf(state),
      });
      lines.push({ event: snapshot, text: encodeEvent(snapshot) });
    }
    const range = (async function* () {
      yield* lines;
      yield* log.readStored(from, to);
    })();
    await writeJsonl(range, options.output ?? process.stdout);
    return 0;
  } finally {
    await log.close();
  }
}

async function collect<T>(items: Iterable<T> | AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of items) out.push(item);
  return out;
}
