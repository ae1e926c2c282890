/** A progress bar on stderr for long replays: only when stderr is a terminal and the log is large. */
import { SingleBar, Presets } from 'cli-progress';
import type { LogSource } from './log-source.js';

const LARGE = { events: 100_000, bytes: 20 * 1024 * 1024 } as const;

/** Reports how far a replay has come. */
export interface Progress {
  /** One more event read; moves the bar of an LMDB source only. */
  event(): void;
  /** `events` more read elsewhere (another thread); moves the bar of an LMDB source only. */
  advance(events: number): void;
  /** Bytes read so far; JSONL sources report them. */
  bytes(read: number): void;
  stop(): void;
}

const silent: Progress = {
  event: () => undefined,
  advance: () => undefined,
  bytes: () => undefined,
  stop: () => undefined,
};

/** A progress bar for reading `source`, or a silent one when it would only be noise. */
export function progressFor(
  source: LogSource,
  stream: NodeJS.WriteStream = process.stderr,
): Progress {
  const { unit, total } = source.size;
  if (!stream.isTTY || total < LARGE[unit]) return silent;
  const bar = new SingleBar(
    {
      stream,
      format: `replay {bar} {percentage}% | ${unit === 'events' ? '{value}/{total} events' : '{value}/{total} MiB'} | {eta}s left`,
      hideCursor: true,
      clearOnComplete: true,
    },
    Presets.shades_classic,
  );
  const scale = unit === 'bytes' ? 1024 * 1024 : 1;
  bar.start(Math.ceil(total / scale), 0);
  let events = 0;
  let shown = 0;
  const show = () => {
    if (Math.abs(events - shown) < 10_000) return;
    shown = events;
    bar.update(events);
  };
  return {
    // A JSONL bar counts MiB read, so events (which forEachEvent reports for every source) must
    // not move it.
    event:
      unit === 'bytes'
        ? () => undefined
        : () => {
            events += 1;
            show();
          },
    advance:
      unit === 'bytes'
        ? () => undefined
        : (count) => {
            events += count;
            show();
          },
    bytes: (read) => bar.update(Math.floor(read / scale)),
    stop: () => bar.stop(),
  };
}
