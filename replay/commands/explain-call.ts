/**
 * Finding one call in a log and explaining its placement against the state it met, and every
 * placement again after a failed dial of it (each against the state that one met).
 */
import type { ClusterEvent, EventOf } from '../../src/events/index.js';
import { explainPlacement, type PlacementExplanation } from '../../src/core/placement/index.js';
import { CallHistory, callView, type CallViewData } from '../../src/projections/index.js';
import type { Config } from '../../src/shared/config.js';
import { printable } from '../../src/shared/printable.js';
import type { CallResult } from '../engine/call-result.js';
import type { StateAtCall } from '../format/explain-screen.js';
import { Replayer } from '../engine/replayer.js';
import type { LogSource } from '../io/log-source.js';
import { forEachEvent } from '../io/read-log.js';
import { QueueWaitTracker, type QueueWait } from '../engine/queue-wait.js';

/** A placement of the call again after one of its streams could not be opened. */
export interface Replacement {
  readonly dial: EventOf<'CallDialFailed'>;
  /** The placement again, explained; null when the call was refused without one. */
  readonly explanation: PlacementExplanation | null;
  readonly result: CallResult | undefined;
}

/** A call found in a log, with its explanation and (once settled) its replay result. */
export interface ExplainedCall {
  readonly request: EventOf<'CallRequested'>;
  readonly explanation: PlacementExplanation;
  /** The call's session and the reservations in force when it was decided. */
  readonly atCall: StateAtCall;
  readonly result: CallResult | undefined;
  /** Its placements again after failed dials, in log order. */
  readonly replacements: readonly Replacement[];
  /** Its whole story as the call history tells it: every step with its time, to its end. */
  readonly lifecycle: CallViewData | undefined;
  /** Its wait in the admission queue; null when it was not queued. */
  readonly queueWait: QueueWait | null;
}

/** Events after which a call is decided no more. */
const ENDS: ReadonlySet<string> = new Set([
  'CallFinished',
  'CallRejected',
  'ReservationExpired',
  'CallLeftQueue',
]);

function endsCall(event: ClusterEvent, requestId: string): boolean {
  return ENDS.has(event.type) && 'requestId' in event && event.requestId === requestId;
}

/**
 * Replays `source` (from `fromSeq`: a snapshot, or the start of an archive file) up to the end of
 * the first call `requestId` (or the one at `seq`) and explains each of its decisions.
 */
export async function explainCall(
  source: LogSource,
  match: { requestId?: string; seq?: number },
  overrides: Partial<Config> = {},
  fromSeq = 0,
  rules: 'recorded' | 'current' = 'recorded',
): Promise<ExplainedCall | undefined> {
  let found: Omit<ExplainedCall, 'result' | 'replacements' | 'lifecycle' | 'queueWait'> | undefined;
  const results = new Map<number, CallResult>();
  const replacements: Omit<Replacement, 'result'>[] = [];
  // A request ID as recorded, or as the screens print it (escaped: src/shared/printable.ts), so
  // an ID holding a control character can be named by what the operator reads.
  const matches = (requestId: string, seq: number) =>
    match.seq !== undefined
      ? seq === match.seq
      : requestId === match.requestId || printable(requestId) === match.requestId;
  const replayer = new Replayer({
    overrides,
    rules,
    onDecide: (call, state, config, request) => {
      if (!found && matches(call.requestId, request.seq)) {
        const explanation = explainPlacement(state, call, { config });
        const chosen =
          explanation.decision.outcome === 'placed'
            ? state.workers.get(explanation.decision.workerId)
            : undefined;
        const utilization = chosen?.utilization;
        found = {
          request,
          explanation,
          // Copies: the replayer changes its state in place after this returns.
          atCall: structuredClone({
            session: (call.sessionId && state.sessions.get(call.sessionId)) || null,
            reservations: [...state.reservations.values()],
            standbys:
              chosen && utilization?.standbys
                ? { workerId: chosen.workerId, at: utilization.at, ready: utilization.standbys }
                : null,
          }),
        };
      }
    },
    onRedecide: (call, state, dial, placedWith) => {
      if (!found || call.requestId !== found.request.requestId) return;
      replacements.push({
        dial,
        explanation: placedWith === null ? null : explainPlacement(state, call, placedWith),
      });
    },
    onCall: (settled) => {
      if (found && settled.requestId === found.request.requestId) results.set(settled.seq, settled);
    },
  });
  const wait = new QueueWaitTracker((requestId) =>
    found ? requestId === found.request.requestId : matches(requestId, -1),
  );
  let ended = false;
  const history = new CallHistory({
    maxCalls: Number.MAX_SAFE_INTEGER,
    retentionMs: Number.MAX_SAFE_INTEGER,
  });
  await forEachEvent(
    source,
    (event) => {
      history.observe(event);
      wait.observe(event);
      replayer.push(event);
      if (found && endsCall(event, found.request.requestId)) ended = true;
      return !ended;
    },
    fromSeq,
    true,
  );
  replayer.end();
  if (!found) return undefined;
  const record = history.get(found.request.requestId);
  return {
    ...found,
    lifecycle: record === undefined ? undefined : callView(record),
    queueWait: wait.result(),
    result: results.get(found.request.seq),
    replacements: replacements.map((part) => ({ ...part, result: results.get(part.dial.seq) })),
  };
}
