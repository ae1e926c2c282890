/** `replay state <log> [--at <seq>|<ISO time>]`: the folded cluster state at a point. */
import type { ClusterEvent } from '../../src/events/index.js';
import { clusterProjection, initialState, stateToJson } from '../../src/projections/index.js';
import { stateView } from '../format/state-view.js';
import { openLogSource } from '../io/log-source.js';
import { forEachEvent } from '../io/read-log.js';
import { ReplayInputError } from '../io/replay-input-error.js';
import { out, type SourceOptions } from './options.js';

/** Options of `replay state`. */
export interface StateOptions extends SourceOptions {
  readonly at?: string;
  readonly json?: boolean;
}

type Point = { seq: number } | { time: string } | undefined;

function parsePoint(at: string | undefined): Point {
  if (at === undefined) return undefined;
  if (/^\d+$/.test(at)) return { seq: Number(at) };
  const ms = Date.parse(at);
  if (Number.isNaN(ms))
    throw new ReplayInputError(`--at ${at}: expected a seq or an ISO-8601 time`);
  return { time: new Date(ms).toISOString() };
}

function before(point: Point, event: ClusterEvent): boolean {
  if (!point) return true;
  return 'seq' in point ? event.seq <= point.seq : event.at <= point.time;
}

/** Runs `replay state`; resolves to the exit status. */
export async function stateCommand(
  logPaths: string | readonly string[],
  options: StateOptions,
): Promise<number> {
  const point = parsePoint(options.at);
  const source = await openLogSource(logPaths, options);
  let state = initialState();
  try {
    // A log starts from its newest snapshot at or before the point (an archive, from the start
    // of the file holding it). Snapshots are indexed by seq, so a time point is folded from the
    // start.
    const from =
      point && 'time' in point
        ? 0
        : ((await source.snapshotAtOrBefore(point?.seq ?? Number.MAX_SAFE_INTEGER)) ?? 0);
    let last: number | undefined;
    let beyond: number | undefined;
    await forEachEvent(
      source,
      (event) => {
        if (!before(point, event)) {
          beyond = event.seq;
          return false;
        }
        state = clusterProjection.apply(state, event);
        last = event.seq;
        return true;
      },
      from,
    );
    // A seq the log holds that was not read: it fell in a range passed over (--skip-damaged).
    const first = source.range?.first;
    if (
      point &&
      'seq' in point &&
      beyond !== undefined &&
      first !== undefined &&
      point.seq >= first &&
      (last ?? first - 1) < point.seq
    ) {
      throw new ReplayInputError(
        `--at ${point.seq}: it falls in a range passed over (a damaged or missing archive file), so the state there cannot be told: pick a seq outside the range reported skipped`,
      );
    }
  } finally {
    await source.close();
  }
  if (options.json) out(JSON.stringify(stateToJson(state)));
  else process.stdout.write(stateView(state));
  return 0;
}
