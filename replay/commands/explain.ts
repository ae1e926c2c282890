/** `replay explain <log> <requestId>`: the state at that call and the full explanation. */
import { explainScreen } from '../format/explain-screen.js';
import { openLogSource } from '../io/log-source.js';
import { ReplayInputError } from '../io/replay-input-error.js';
import { turnScreen } from '../format/turn-screen.js';
import { explainCall } from './explain-call.js';
import { explainTurnRefusal } from './explain-turn.js';
import { out, parseOverrides, type SourceOptions } from './options.js';

/** Options of `replay explain`. */
export interface ExplainOptions extends SourceOptions {
  readonly json?: boolean;
  readonly set?: readonly string[];
}

/** The call explained from the first event of the log (the request was not where it was looked for). */
async function explainFromStart(
  paths: readonly string[],
  requestId: string,
  overrides: ReturnType<typeof parseOverrides>,
  options: SourceOptions,
): ReturnType<typeof explainCall> {
  const source = await openLogSource(paths, options);
  try {
    return await explainCall(source, { requestId }, overrides);
  } finally {
    await source.close();
  }
}

/** Runs `replay explain`; resolves to the exit status. */
export async function explainCommand(
  logPaths: string | readonly string[],
  requestId: string,
  options: ExplainOptions,
): Promise<number> {
  const overrides = parseOverrides(options.set);
  const paths = typeof logPaths === 'string' ? [logPaths] : logPaths;
  const source = await openLogSource(paths, options);
  try {
    // Across an archive, start at the file that mentions the request: it starts at a snapshot.
    const from = await source.locate(requestId);
    let explained = await explainCall(source, { requestId }, overrides, from);
    if (!explained && from > (source.range?.first ?? 0)) {
      explained = await explainFromStart(paths, requestId, overrides, options);
    }
    if (!explained) {
      // A session call refused "session is busy" never reached placement: no CallRequested.
      const refused = await explainTurnRefusal(source, requestId);
      if (!refused) {
        throw new ReplayInputError(
          `${paths.join(' ')}: no CallRequested and no SessionTurnRefused for request ${requestId}`,
        );
      }
      out(
        options.json
          ? JSON.stringify({
              refusal: refused.refusal,
              lifecycle: refused.lifecycle ?? null,
              waitTimeoutMs: refused.waitTimeoutMs,
              running: refused.running,
              recorded: refused.check?.recorded ?? 'none',
            })
          : turnScreen(refused).trimEnd(),
      );
      return 0;
    }
    if (options.json) {
      out(
        JSON.stringify({
          request: explained.request,
          lifecycle: explained.lifecycle ?? null,
          queueWait: explained.queueWait,
          explanation: explained.explanation,
          session: explained.atCall.session,
          reservations: explained.atCall.reservations,
          standbys: explained.atCall.standbys ?? null,
          recorded: explained.result?.recorded ?? 'none',
          recordedEvents: explained.result?.recordedEvents ?? null,
          replacements: explained.replacements.map(({ dial, explanation, result }) => ({
            seq: dial.seq,
            workerId: dial.workerId,
            error: dial.error,
            explanation,
            decision: result?.decision ?? null,
            recorded: result?.recorded ?? 'none',
            recordedEvents: result?.recordedEvents ?? null,
          })),
        }),
      );
    } else {
      process.stdout.write(
        explainScreen(
          explained.request,
          explained.explanation,
          explained.result,
          explained.atCall,
          explained.replacements,
          explained.lifecycle,
          explained.queueWait,
        ),
      );
    }
    return 0;
  } finally {
    await source.close();
  }
}
