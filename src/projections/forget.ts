/**
 * Forgetting what no rule needs any more (docs/router.md, "What the router remembers"), run by
 * `applyEvent` before each event with that event's time, so the state the event meets (and any
 * decision made on it) is the same live and in replay:
 * - an ended or expired session, `SESSION_RETENTION` after it ended: until then its calls are
 *   refused `NOT_FOUND` "session expired"; after, its ID is unknown, as if never used;
 * - a tenant's call, `PIN_RETENTION` after it was requested (the window in which its retries reuse
 *   its resolution, as long as the version it resolved to stays protected); one still holding its
 *   reservation is kept, moved to the back as if requested now, so a running call's retry always
 *   finds it.
 * Both walk their oldest-first records and stop at the first one not yet due, so a pass costs
 * what it forgets.
 */
import type { Draft } from 'immer';
import type { ClusterEvent } from '../events/types.js';
import type { ClusterState } from './cluster-state.js';
import { instantMs } from '../shared/instant.js';
import { rulesSteps } from './rules-steps.js';
import type { TenantCall } from './routing-state.js';

type State = Draft<ClusterState>;

/**
 * Forgets, as of `event`'s timestamp, the sessions and tenant calls no rule needs. Under rules
 * before 4 (a log recorded then) sessions were never forgotten, and tenant calls only as of the
 * next tenant's call.
 */
export function forgetDue(state: State, event: ClusterEvent): void {
  const { at } = event;
  const now = instantMs(at);
  if (Number.isNaN(now)) return;
  if (!rulesSteps(state.rulesVersion).forgetsAsOfAnyEvent) {
    if (event.type === 'CallRequested' && event.tenantId !== null) {
      forgetCalls(state, now - state.config.PIN_RETENTION, at);
    }
    return;
  }
  forgetSessions(state, now - state.config.SESSION_RETENTION);
  forgetCalls(state, now - state.config.PIN_RETENTION, at);
}

/** Drops the sessions that ended before `cutoff` (epoch ms), and their resolutions. */
function forgetSessions(state: State, cutoff: number): void {
  const expiries = state.sessionExpiries;
  for (const [sessionId, endedAt] of expiries) {
    if (endedAt >= cutoff) break;
    expiries.delete(sessionId);
    if (state.sessions.get(sessionId)?.expired) state.sessions.delete(sessionId);
    state.routing.sessions.delete(sessionId);
  }
}

/** Drops the tenant calls requested before `cutoff` (epoch ms) that no longer run. */
function forgetCalls(state: State, cutoff: number, at: string): void {
  const calls = state.routing.calls;
  const kept: [string, TenantCall][] = [];
  for (const [requestId, call] of calls) {
    if (instantMs(call.at) >= cutoff) break;
    calls.delete(requestId);
    if (state.reservations.has(requestId)) kept.push([requestId, { ...call, at }]);
  }
  for (const [requestId, call] of kept) calls.set(requestId, call);
}

/** Notes that `sessionId` ended at `at`: it is forgotten `SESSION_RETENTION` later. */
export function scheduleForgetting(state: State, sessionId: string, at: string): void {
  state.sessionExpiries.delete(sessionId);
  state.sessionExpiries.set(sessionId, instantMs(at));
}
