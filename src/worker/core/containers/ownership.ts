/**
 * A session's container belongs to that session alone: only a call of the session that created it
 * resumes it, and only that session's end destroys it, whoever asks. Pure.
 */
import { ContainerBusyError, ContainerNotFoundError, ContainerOwnedError } from '../errors.js';
import type { ContainerLifecycle } from './lifecycle.js';

/** A container as the session rules read it. */
export interface SessionContainer {
  readonly state: ContainerLifecycle;
  /** Its executor still runs. */
  readonly alive: boolean;
  /** The session it belongs to; empty: none (destroyed after its call). */
  readonly sessionId: string;
  /** The request it runs now, if busy. */
  readonly requestId: string;
}

/**
 * Throws why a call of `sessionId` (empty: none) may not resume `containerId` (`container`: the
 * worker's record of it, undefined when it holds none): ContainerNotFoundError, ContainerOwnedError
 * or ContainerBusyError.
 */
export function checkResumable<C extends SessionContainer>(
  container: C | undefined,
  containerId: string,
  sessionId: string,
): asserts container is C {
  if (!container || container.state === 'removed' || !container.alive) {
    throw new ContainerNotFoundError(
      `container ${containerId} is not on this worker (it was destroyed or never created here)`,
    );
  }
  if (container.sessionId === '' || container.sessionId !== sessionId) {
    throw new ContainerOwnedError(
      sessionId === ''
        ? `container ${containerId} belongs to a session: a call without that session cannot resume it`
        : `container ${containerId} does not belong to session ${sessionId}: only the session that created it may resume it`,
    );
  }
  if (container.state === 'busy') {
    throw new ContainerBusyError(
      `container ${containerId} is busy with request ${container.requestId}`,
    );
  }
}

/** What the end of a session does to a container the router named as the session's. */
export type SessionEnd =
  /** The worker holds no such container (destroyed already, or never here). */
  | { readonly step: 'not-held' }
  | { readonly step: 'refused'; readonly refusal: ContainerOwnedError }
  /** A call runs in it: destroyed when that call ends, never kept. */
  | { readonly step: 'after-call' }
  | { readonly step: 'destroy' };

/** What ending `sessionId` does to `containerId` (`container`: the worker's record, if any). */
export function sessionEnd(
  container: SessionContainer | undefined,
  containerId: string,
  sessionId: string,
): SessionEnd {
  if (!container || container.state === 'removed') return { step: 'not-held' };
  if (container.sessionId === '' || container.sessionId !== sessionId) {
    return {
      step: 'refused',
      refusal: new ContainerOwnedError(
        `container ${containerId} does not belong to session ${sessionId}: only its own session's end destroys it`,
      ),
    };
  }
  return container.state === 'busy' ? { step: 'after-call' } : { step: 'destroy' };
}
