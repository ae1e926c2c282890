/**
 * A client ends its session (shell of `TenantService.EndSession`): take the session's turn (a
 * call of it running on this router finishes first), record the core's decision
 * (`decideSessionEnd`: `SessionEnded`) and wait for its commit, then ask the container's worker to destroy it now
 * (`ExecutionService.DestroySessionContainer`), so its slot is free at once rather than after
 * `EXECUTOR_TTL`. A worker that cannot be reached destroys the container when it idles out.
 */
import type { Metadata } from '@grpc/grpc-js';
import { decide } from '../../core/decisions.js';
import { sessionToEnd } from '../../core/sessions/session-end.js';
import type { EndSessionResponse } from '../../proto/gen/readie/v1/tenant.js';
import type { Config } from '../../shared/config.js';
import type { Journal } from '../journal/index.js';
import type { Logger } from '../observability/logger.js';
import type { WorkerConnections } from '../workers/index.js';
import type { SessionTurns } from './session-turns.js';

/** How long the router waits for a worker to destroy an ended session's container. */
export const DESTROY_TIMEOUT_MS = 10_000;

/** What ending a session needs. */
export interface SessionEndDeps {
  readonly journal: Journal;
  readonly turns: SessionTurns;
  readonly connections: WorkerConnections;
  readonly config: Pick<Config, 'SESSION_WAIT_TIMEOUT'>;
  /** The router's clock, epoch ms: the worker's deadline counts from it. */
  readonly clock: () => number;
  readonly logger: Logger;
  /** The router's own credential, presented to workers. */
  readonly workerMetadata: Metadata;
}

/** Ends `sessionId` for `tenantId`; `signal` aborts the wait for the session's turn. */
export async function endSession(
  deps: SessionEndDeps,
  sessionId: string,
  tenantId: string | null,
  signal?: AbortSignal,
): Promise<EndSessionResponse> {
  sessionToEnd(sessionId);
  // The line of the caller's tenant: ending another tenant's session never waits on its calls.
  const turn = await deps.turns.acquire(sessionId, {
    timeoutMs: deps.config.SESSION_WAIT_TIMEOUT,
    signal,
    tenantId,
  });
  try {
    const decision = decide('sessionEnd', deps.journal.state, { sessionId, tenantId });
    // Recorded before the container goes: a client told its session ended, and a worker told to
    // destroy it, can rely on the end surviving a router crash.
    await deps.journal.record(decision).committed;
    const fields = {
      sessionId,
      tenantId,
      workerId: decision.pin?.workerId ?? null,
      containerId: decision.pin?.containerId ?? null,
    };
    if (decision.foreign !== undefined) {
      // Answered exactly as for an unknown session; the operator hears whose it is.
      deps.logger.warn(
        { sessionId, tenantId, foreign: 'session', ownerTenantId: decision.foreign.ownerTenantId },
        "session end refused: it names another tenant's session (answered as an unknown session)",
      );
    } else if (!decision.ended) {
      deps.logger.debug(fields, 'session end: already ended, expired or unknown');
    }
    if (!decision.ended) {
      return { ended: false, workerId: '', containerId: '', containerRemoved: false };
    }
    let removed = false;
    if (decision.container !== null) {
      const { address, containerId } = decision.container;
      try {
        removed = await destroyContainer(deps, address, sessionId, containerId);
      } catch (error) {
        deps.logger.warn(
          { ...fields, err: (error as Error).message },
          'session ended, but its worker did not destroy the container (it idles out)',
        );
      }
    }
    deps.logger.info({ ...fields, containerRemoved: removed }, 'session ended');
    return {
      ended: true,
      workerId: fields.workerId ?? '',
      containerId: fields.containerId ?? '',
      containerRemoved: removed,
    };
  } finally {
    turn.release();
  }
}

function destroyContainer(
  deps: SessionEndDeps,
  address: string,
  sessionId: string,
  containerId: string,
): Promise<boolean> {
  return new Promise((resolve, reject) => {
    deps.connections
      .sessions(address)
      .destroySessionContainer(
        { sessionId, containerId },
        deps.workerMetadata.clone(),
        { deadline: deps.clock() + DESTROY_TIMEOUT_MS },
        (error, answer) => (error ? reject(error) : resolve(answer.removed)),
      );
  });
}
