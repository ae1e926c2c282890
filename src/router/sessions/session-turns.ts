/**
 * Session turn-taking (shell): one call per session runs at a time; the others wait in arrival
 * order for at most `SESSION_WAIT_TIMEOUT`, then fail `RESOURCE_EXHAUSTED` "session is busy". A
 * waiting caller that goes away leaves the line at once.
 */
import { CallAbandonedError, SessionBusyError } from '../../core/errors.js';
import { TurnQueue } from '../../core/sessions/turn-queue.js';

/** A held turn: release it exactly when the call is over (releasing twice is harmless). */
export interface SessionTurn {
  readonly sessionId: string;
  release(): void;
}

interface Ticket {
  grant(): void;
}

/** How long to wait, and the signal that the caller went away. */
export interface TurnRequest {
  readonly timeoutMs: number;
  readonly signal?: AbortSignal | undefined;
}

/** The turns of every session on this router. */
export class SessionTurns {
  private readonly queue = new TurnQueue<Ticket>();

  /** Waits for the session's turn; rejects with `SessionBusyError` or `CallAbandonedError`. */
  acquire(sessionId: string, request: TurnRequest): Promise<SessionTurn> {
    const { timeoutMs, signal } = request;
    return new Promise<SessionTurn>((resolve, reject) => {
      if (signal?.aborted) {
        reject(new CallAbandonedError(`the caller left before session ${sessionId} had its turn`));
        return;
      }
      const waiting: { timer?: NodeJS.Timeout } = {};
      const onAbort = () => {
        clearTimeout(waiting.timer);
        if (this.queue.withdraw(sessionId, ticket)) {
          reject(
            new CallAbandonedError(`the caller left while waiting for session ${sessionId}'s turn`),
          );
        }
      };
      const ticket: Ticket = {
        grant: () => {
          clearTimeout(waiting.timer);
          signal?.removeEventListener('abort', onAbort);
          resolve(this.turnOf(sessionId, ticket));
        },
      };
      if (this.queue.request(sessionId, ticket)) {
        ticket.grant();
        return;
      }
      waiting.timer = setTimeout(() => {
        signal?.removeEventListener('abort', onAbort);
        const ahead = this.queue.placeOf(sessionId, ticket);
        if (this.queue.withdraw(sessionId, ticket)) {
          reject(new SessionBusyError(sessionId, timeoutMs, Math.max(0, ahead)));
        }
      }, timeoutMs);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** Calls waiting for their session's turn. */
  get waiting(): number {
    return this.queue.totalWaiting;
  }

  private turnOf(sessionId: string, ticket: Ticket): SessionTurn {
    let released = false;
    return {
      sessionId,
      release: () => {
        if (released) return;
        released = true;
        this.queue.release(sessionId, ticket)?.grant();
      },
    };
  }
}
