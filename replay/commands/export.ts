/**
 * `replay export <log...>`: a range of an LMDB or JetStream log, of its archive, or of both, as
 * JSONL. A range that starts after the first event given begins with a `Snapshot` of the state
 * before it, so it stands alone.
 */
import { rmSync } from 'node:fs';
import {
  encodeEvent,
  validateEvent,
  writeJsonl,
  type ClusterEvent,
  type StoredEvent,
} from '../../src/events/index.js';
import { clusterProjection, initialState, snapshotOf } from '../../src/projections/index.js';
import { openLogSource, type LogSource } from '../io/log-source.js';
import { ReplayInputError } from '../io/replay-input-error.js';
import { parseSeq, type SourceOptions } from './options.js';

/** Options of `replay export`. */
export interface ExportOptions extends SourceOptions {
  readonly from?: string;
  readonly to?: string;
  readonly output?: string;
}

/** Runs `replay export`; resolves to the exit status. */
export async function exportCommand(
  logPaths: string | readonly string[],
  options: ExportOptions,
): Promise<number> {
  const paths = typeof logPaths === 'string' ? [logPaths] : logPaths;
  const source = await openLogSource(paths, options);
  try {
    if (source.kind === 'jsonl') {
      throw new ReplayInputError(
        `${source.path}: export reads an LMDB log, a JetStream stream or an archive, not a JSONL file`,
      );
    }
    const range = source.range;
    if (range === undefined) throw new ReplayInputError(`${paths.join(' ')}: the log is empty`);
    const asked = options.from === undefined ? range.first : parseSeq('--from', options.from);
    const to = options.to === undefined ? range.last : parseSeq('--to', options.to);
    if (asked < range.first || asked > range.last) {
      throw new ReplayInputError(
        `--from ${asked}: the log holds seq ${range.first} to ${range.last}`,
      );
    }
    // A range starts with a whole append: one cut inside it would hold a decision's later events
    // without its first, which a replay of the range takes for a decision of its own.
    const from = asked > range.first ? await appendStart(source, asked, range.first) : asked;
    if (from < asked) {
      process.stderr.write(
        `replay: --from ${asked} falls inside an append (its events from seq ${from} share one cause): exporting from seq ${from}, so its decision stands whole\n`,
      );
    }
    if (to < from) throw new ReplayInputError(`--to ${to} is before --from ${from}`);
    const lines: StoredEvent[] = [];
    if (from > range.first) {
      const start = (await source.snapshotAtOrBefore(from - 1)) ?? range.first;
      let state = initialState();
      let before: ClusterEvent | undefined;
      for await (const event of source.events(start)) {
        if (event.seq >= from) break;
        state = clusterProjection.apply(state, event);
        before = event;
      }
      if (before !== undefined) {
        const snapshot = validateEvent({
          seq: from - 1,
          at: before.at,
          type: 'Snapshot',
          schemaVersion: state.schemaVersion,
          state: snapshotOf(state),
        });
        lines.push({ event: snapshot, text: encodeEvent(snapshot) });
      } else if (!(await startsAtSnapshot(source, from))) {
        // Nothing before it was read (a damaged file passed over), and it is no snapshot itself.
        throw new ReplayInputError(
          `--from ${from}: the events before it could not be read from the snapshot at seq ${start} (a damaged file passed over?): export from a snapshot after the range passed over (the first seq of the next archive file)`,
        );
      }
    }
    const events = (async function* () {
      yield* lines;
      yield* withoutGaps(source.stored(from, to), from);
    })();
    try {
      await writeJsonl(events, options.output ?? process.stdout);
    } catch (error) {
      // A refused export leaves no file behind that could pass for the range.
      if (options.output !== undefined) rmSync(options.output, { force: true });
      throw error;
    }
    return 0;
  } finally {
    await source.close();
  }
}

/**
 * The first seq of the append that holds `seq`: the first of the events before it, back to the
 * snapshot the source can fold from, that share its cause without a break (a snapshot, or a log
 * that records no causes, breaks none).
 */
async function appendStart(source: LogSource, seq: number, first: number): Promise<number> {
  const from = (await source.snapshotAtOrBefore(seq - 1)) ?? first;
  let runStart = seq;
  let runCause: string | null = null;
  for await (const event of source.events(from)) {
    if (event.seq > seq) break;
    const continues = event.cause !== null && event.cause === runCause && event.type !== 'Snapshot';
    if (!continues) runStart = event.seq;
    runCause = event.type === 'Snapshot' ? null : event.cause;
    if (event.seq === seq) return runStart;
  }
  return seq;
}

/** Whether the event at `seq` is a `Snapshot` (a range from it stands alone). */
async function startsAtSnapshot(source: LogSource, seq: number): Promise<boolean> {
  for await (const line of source.stored(seq, seq)) return line.event.type === 'Snapshot';
  return false;
}

/**
 * The events of `stored`, refused at a gap (a file passed over with `--skip-damaged`): a log
 * with a hole in it is one no reader takes.
 */
async function* withoutGaps(
  stored: AsyncIterable<StoredEvent>,
  from: number,
): AsyncGenerator<StoredEvent> {
  let next = from;
  for await (const line of stored) {
    const { seq } = line.event;
    if (seq !== next) {
      throw new ReplayInputError(
        `export would leave out seq ${next} to ${seq - 1} (passed over): a log with a gap is not one replay reads; export the ranges on either side apart (--to ${next - 1}, --from ${seq})`,
      );
    }
    next = seq + 1;
    yield line;
  }
}
