/** Running replay in tests: the engine over in-memory events, and the real CLI as a child process. */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { decodeEvent, type ClusterEvent } from '../../src/events/index.js';
import { callLine, type CallLine, type CallResult } from '../../replay/engine/call-result.js';
import { Replayer, type ReplayOptions } from '../../replay/engine/replayer.js';

/** The repository root. */
export const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** The events of a JSONL file, read synchronously (fixtures are small). */
export function readEvents(path: string): ClusterEvent[] {
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line, i) => decodeEvent(line, { line: i + 1 }));
}

/** Replays events and returns every call's result. */
export function replayEvents(
  events: Iterable<ClusterEvent>,
  options: ReplayOptions = {},
): CallResult[] {
  const results: CallResult[] = [];
  const replayer = new Replayer({ ...options, onCall: (result) => results.push(result) });
  for (const event of events) replayer.push(event);
  replayer.end();
  return results;
}

/** The `replay run --json` lines of events. */
export function runLines(events: Iterable<ClusterEvent>): CallLine[] {
  return replayEvents(events).map(callLine);
}

/** The result of running the `replay` CLI. */
export interface CliRun {
  readonly status: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs `node bin/replay.js ...args` and waits for it. */
export function replayCli(...args: string[]): CliRun {
  const run = spawnSync(process.execPath, [`${ROOT}bin/replay.js`, ...args], {
    cwd: ROOT,
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  });
  return { status: run.status, stdout: run.stdout, stderr: run.stderr };
}
