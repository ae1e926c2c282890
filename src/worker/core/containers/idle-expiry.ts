/**
 * Idle session containers (EXECUTOR_TTL): which container a call leaves kept for its session, and
 * when a kept one expires (destroyed and reported removed, at that age exactly). The worker owns
 * this policy; the router only forgets a record whose removal it never heard of. Pure: the time
 * is an argument.
 */
import type { ContainerLifecycle } from './lifecycle.js';

/** A container as its call leaves it. */
export interface ContainerAfterCall {
  readonly state: ContainerLifecycle;
  /** Its executor still runs. */
  readonly alive: boolean;
  /** Its session was ended while the call ran. */
  readonly sessionEnded: boolean;
}

/**
 * Whether a container is kept idle for its session's next call (else destroyed): the call asked
 * to `keep` it, it is still busy with that call and alive, its session was not ended meanwhile,
 * and the pool is not `closing`.
 */
export function keptForSession(
  container: ContainerAfterCall,
  keep: boolean,
  closing: boolean,
): boolean {
  return (
    keep && !container.sessionEnded && container.alive && container.state === 'busy' && !closing
  );
}

/**
 * How long from `now` until an idle container whose last call ended at `lastUsedAt` expires
 * (`idleTtlMs`, EXECUTOR_TTL), in ms; 0 once it has.
 */
export function idleExpiresIn(lastUsedAt: number, now: number, idleTtlMs: number): number {
  return Math.max(0, idleTtlMs - (now - lastUsedAt));
}

/** Whether a container whose idle time is up is destroyed: only if still idle (not resumed). */
export function expiresIdle(state: ContainerLifecycle): boolean {
  return state === 'ready';
}
