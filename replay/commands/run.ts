/** `replay run <log>`: fold the log and decide every call, comparing with what was recorded. */
import { callLine } from '../engine/call-result.js';
import { Replayer } from '../engine/replayer.js';
import { callRow, callTable, countCall, emptySummary, summaryLine } from '../format/run-report.js';
import { openLogSource } from '../io/log-source.js';
import { forEachEvent } from '../io/read-log.js';
import { out, parseOverrides, type SourceOptions } from './options.js';

/** Options of `replay run`. */
export interface RunOptions extends SourceOptions {
  readonly json?: boolean;
  readonly set?: readonly string[];
}

/** Runs `replay run`; resolves to the exit status. */
export async function runCommand(
  logPaths: string | readonly string[],
  options: RunOptions,
): Promise<number> {
  const overrides = parseOverrides(options.set);
  const source = await openLogSource(logPaths, options);
  const summary = emptySummary();
  const rows: string[][] = [];
  const replayer = new Replayer({
    overrides,
    onCall: (result) => {
      countCall(summary, result);
      if (options.json) out(JSON.stringify(callLine(result)));
      else rows.push(callRow(result));
    },
  });
  try {
    // The replayer folds every event: the snapshots after the first are passed over.
    await forEachEvent(source, (event) => replayer.push(event), 0, true);
    replayer.end();
  } finally {
    await source.close();
  }
  if (!options.json) {
    if (rows.length > 0) out(callTable(rows));
    out(summaryLine(summary));
  }
  return 0;
}
