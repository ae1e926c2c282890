/**
 * `replay export <log...>`: a range of an LMDB or JetStream log, of its archive, or of both, as
 * JSONL. A range that starts after the first event given begins with a `Snapshot` of the state
 * before it, so it stands alone.
 */
import {
  encodeEvent,
  validateEvent,
  writeJsonl,
  type ClusterEvent,
  type StoredEvent,
} from '../../src/events/index.js';
import { clusterProjection, initialState, snapshotOf } from '../../src/projections/index.js';
import { openLogSource } from '../io/log-source.js';
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
    const from = options.from === undefined ? range.first : parseSeq('--from', options.from);
    const to = options.to === undefined ? range.last : parseSeq('--to', options.to);
    if (from < range.first || from > range.last) {
      throw new ReplayInputError(
        `--from ${from}: the log holds seq ${range.first} to ${range.last}`,
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
      const snapshot = validateEvent({
        seq: from - 1,
        at: before?.at ?? '',
        type: 'Snapshot',
        schemaVersion: state.schemaVersion,
        state: snapshotOf(state),
      });
      lines.push({ event: snapshot, text: encodeEvent(snapshot) });
    }
    const events = (async function* () {
      yield* lines;
      yield* source.stored(from, to);
    })();
    await writeJsonl(events, options.output ?? process.stdout);
    return 0;
  } finally {
    await source.close();
  }
}
