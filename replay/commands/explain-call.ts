/** Finding one call in a log and explaining its placement against the state it met. */
import type { EventOf } from '../../src/events/index.js';
import { explainPlacement, type PlacementExplanation } from '../../src/core/placement/index.js';
import type { Config } from '../../src/shared/config.js';
import type { CallResult } from '../engine/call-result.js';
import type { StateAtCall } from '../format/explain-screen.js';
import { Replayer } from '../engine/replayer.js';
import type { LogSource } from '../io/log-source.js';
import { forEachEvent } from '../io/read-log.js';

/** A call found in a log, with its explanation and (once settled) its replay result. */
export interface ExplainedCall {
  readonly request: EventOf<'CallRequested'>;
  readonly explanation: PlacementExplanation;
  /** The call's session and the reservations in force when it was decided. */
  readonly atCall: StateAtCall;
  readonly result: CallResult | undefined;
}

/** Replays `source` up to the first call `requestId` (or the one at `seq`) and explains it. */
export async function explainCall(
  source: LogSource,
  match: { requestId?: string; seq?: number },
  overrides: Partial<Config> = {},
): Promise<ExplainedCall | undefined> {
  let found: Omit<ExplainedCall, 'result'> | undefined;
  let result: CallResult | undefined;
  const matches = (requestId: string, seq: number) =>
    match.seq !== undefined ? seq === match.seq : requestId === match.requestId;
  const replayer = new Replayer({
    overrides,
    onDecide: (call, state, config, request) => {
      if (!found && matches(call.requestId, request.seq)) {
        found = {
          request,
          explanation: explainPlacement(state, call, { config }),
          // Copies: the replayer changes its state in place after this returns.
          atCall: structuredClone({
            session: (call.sessionId && state.sessions.get(call.sessionId)) || null,
            reservations: [...state.reservations.values()],
          }),
        };
      }
    },
    onCall: (settled) => {
      if (found && settled.seq === found.request.seq) result = settled;
    },
  });
  await forEachEvent(source, (event) => {
    replayer.push(event);
    return result === undefined;
  });
  if (result === undefined) replayer.end();
  return found ? { ...found, result } : undefined;
}
