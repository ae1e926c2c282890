/**
 * Explaining a session call refused "session is busy": it waited its session's turn for
 * `SESSION_WAIT_TIMEOUT` and never reached placement, so the log holds no `CallRequested` of it,
 * only its `SessionTurnRefused`. Its story is the wait, the calls of its session in flight then,
 * and the refusal made again.
 */
import type { EventOf } from '../../src/events/index.js';
import {
  CallHistory,
  callView,
  type CallViewData,
  type Reservation,
} from '../../src/projections/index.js';
import { printable } from '../../src/shared/printable.js';
import type { DecisionResult } from '../engine/append-check.js';
import { Replayer } from '../engine/replayer.js';
import type { LogSource } from '../io/log-source.js';
import { forEachEvent } from '../io/read-log.js';

/** A session call refused before placement, found in a log. */
export interface RefusedTurn {
  readonly refusal: EventOf<'SessionTurnRefused'>;
  /** `SESSION_WAIT_TIMEOUT` in force at the refusal, ms. */
  readonly waitTimeoutMs: number;
  /** The calls of its session in flight when it was refused (copies). */
  readonly running: readonly Reservation[];
  /** The refusal made again against the state it met. */
  readonly check: DecisionResult | undefined;
  readonly lifecycle: CallViewData | undefined;
}

/** Replays `source` up to the first "session is busy" refusal of `requestId`, if any. */
export async function explainTurnRefusal(
  source: LogSource,
  requestId: string,
): Promise<RefusedTurn | undefined> {
  let found: Omit<RefusedTurn, 'check' | 'lifecycle'> | undefined;
  let check: DecisionResult | undefined;
  const replayer = new Replayer({
    onDecision: (result) => {
      if (result.trigger === 'turnRefusal' && found && result.seq === found.refusal.seq) {
        check = result;
      }
    },
  });
  const history = new CallHistory({
    maxCalls: Number.MAX_SAFE_INTEGER,
    retentionMs: Number.MAX_SAFE_INTEGER,
  });
  await forEachEvent(source, (event) => {
    if (
      event.type === 'SessionTurnRefused' &&
      (event.requestId === requestId || printable(event.requestId) === requestId)
    ) {
      const state = replayer.state;
      found = {
        refusal: event,
        waitTimeoutMs: state.config.SESSION_WAIT_TIMEOUT,
        running: structuredClone(
          [...state.reservations.values()].filter((r) => r.sessionId === event.sessionId),
        ),
      };
    }
    history.observe(event);
    replayer.push(event);
    return found === undefined;
  });
  replayer.end();
  if (!found) return undefined;
  const record = history.get(found.refusal.requestId);
  return { ...found, check, lifecycle: record === undefined ? undefined : callView(record) };
}
