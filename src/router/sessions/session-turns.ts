/**
 * Session turn-taking (shell): one call per session runs at a time; the others wait in arrival
 * order for at most `SESSION_WAIT_TIMEOUT`, then fail `RESOURCE_EXHAUSTED` "session is busy". A
 * waiting caller that goes away leaves the line at once. Turns are the caller's tenant's: a
 * session ID named by another tenant is another line, so its caller never waits behind the
 * owner's calls (placement then refuses it as it refuses any session it does not own).
 */
import { CallAbandonedError, SessionBusyError } from '../../core/errors.js';
import { TurnQueue } from '../../core/sessions/turn-queue.js';

/** A held turn: release it exactly when the call is over (releasing twice is harmless). */
export interface SessionTurn {
  readonly sessionId: string;
  /** How long the caller waited for it, ms (0: it had the turn at once). */
  readonly waitedMs: number;
  release(): void;
}

interface Ticket {
  grant(): void;
}

/** How long to wait, the signal that the caller went away, and the caller's tenant. */
export interface TurnRequest {
  readonly timeoutMs: number;
  readonly signal?: AbortSignal | undefined;
  /** The tenant the caller's credential names (null or absent: none). */
  readonly tenantId?: string | null | undefined;
}

/** The line a caller of `tenantId` waits in for `sessionId` (tenant IDs hold no newline). */
function lineOf(sessionId: string, tenantId: string | null | undefined): string {
  return `${tenantId ?? ''}\n${sessionId}`;
}

/** The turns of every session on this router. */
export class SessionTurns {
  private readonly queue = new TurnQueue<Ticket>();

  /** `clock`: the router's, in epoch ms (how long a call waited is logged). */
  constructor(private readonly clock: () => number = Date.now) {}

  /** Waits for the session's turn; rejects with `SessionBusyError` or `CallAbandonedError`. */
  acquire(sessionId: string, request: TurnRequest): Promise<SessionTurn> {
    const { timeoutMs, signal } = request;
    const line = lineOf(sessionId, request.tenantId);
    return new Promise<SessionTurn>((resolve, reject) => {
      if (signal?.aborted) {
        reject(new CallAbandonedError(`the caller left before session ${sessionId} had its turn`));
        return;
      }
      const waiting: { timer?: NodeJS.Timeout } = {};
      const asked = this.clock();
      const onAbort = () => {
        clearTimeout(waiting.timer);
        if (this.queue.withdraw(line, ticket)) {
          reject(
            new CallAbandonedError(`the caller left while waiting for session ${sessionId}'s turn`),
          );
        }
      };
      const ticket: Ticket = {
        grant: () => {
          clearTimeout(waiting.timer);
          signal?.removeEventListener('abort', onAbort);
          resolve(this.turnOf(sessionId, line, ticket, this.clock() - asked));
        },
      };
      if (this.queue.request(line, ticket)) {
        // Its turn at once: it did not wait, however the clock moved meanwhile.
        resolve(this.turnOf(sessionId, line, ticket));
        return;
      }
      waiting.timer = setTimeout(() => {
        signal?.removeEventListener('abort', onAbort);
        const ahead = this.queue.placeOf(line, ticket);
        if (this.queue.withdraw(line, ticket)) {
          reject(
            new SessionBusyError(
              sessionId,
              Math.max(timeoutMs, this.clock() - asked),
              Math.max(0, ahead),
            ),
          );
        }
      }, timeoutMs);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** Calls waiting for their session's turn. */
  get waiting(): number {
    return this.queue.totalWaiting;
  }

  private turnOf(sessionId: string, line: string, ticket: Ticket, waitedMs = 0): SessionTurn {
    let released = false;
    return {
      sessionId,
      waitedMs,
      release: () => {
        if (released) return;
        released = true;
        this.queue.release(line, ticket)?.grant();
      },
    };
  }
}
