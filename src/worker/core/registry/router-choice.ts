/**
 * Which router a worker reports to after a refusal: a standby names the leader (followed only
 * when it is one of the configured routers, so no router can send the worker elsewhere); an
 * unreachable router is left for the next one in the list. Pure.
 */

/** Where reports go after a refusal, or null: they stay with the current router. */
export function routerAfterRefusal(
  routers: readonly string[],
  current: number,
  /** Whether the refusal said the router did not answer (UNAVAILABLE, DEADLINE_EXCEEDED). */
  unreachable: boolean,
  /** The leader a standby's refusal named, if any. */
  leaderHint: string | undefined,
): { readonly index: number; readonly leaderNamed: boolean } | null {
  if (routers.length < 2 || !unreachable) return null;
  const named = leaderHint === undefined ? -1 : routers.indexOf(leaderHint);
  return {
    index: named >= 0 && named !== current ? named : (current + 1) % routers.length,
    leaderNamed: named >= 0,
  };
}
