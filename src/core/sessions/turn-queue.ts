/**
 * Turn bookkeeping for sessions (pure): one call per session holds the turn; the others wait in
 * arrival order. Tickets are opaque to the queue. Timeouts and cancellation live in the shell
 * (`session-turns.ts`), which withdraws a ticket that gave up.
 */

interface SessionLine<T> {
  holder: T;
  readonly waiting: T[];
}

/** Who holds each session's turn and who waits for it, first come first served. */
export class TurnQueue<T> {
  private readonly lines = new Map<string, SessionLine<T>>();

  /** Asks for the session's turn: true when `ticket` holds it now, false when it was queued. */
  request(sessionId: string, ticket: T): boolean {
    const line = this.lines.get(sessionId);
    if (!line) {
      this.lines.set(sessionId, { holder: ticket, waiting: [] });
      return true;
    }
    line.waiting.push(ticket);
    return false;
  }

  /**
   * Gives up the turn `ticket` holds; returns the next ticket in line, which now holds the turn,
   * or undefined when nobody waits. Releasing a turn one does not hold changes nothing.
   */
  release(sessionId: string, ticket: T): T | undefined {
    const line = this.lines.get(sessionId);
    if (!line || line.holder !== ticket) return undefined;
    const next = line.waiting.shift();
    if (next === undefined) {
      this.lines.delete(sessionId);
      return undefined;
    }
    line.holder = next;
    return next;
  }

  /** Takes a waiting ticket out of line (it timed out or its caller left); true if it waited. */
  withdraw(sessionId: string, ticket: T): boolean {
    const line = this.lines.get(sessionId);
    if (!line) return false;
    const index = line.waiting.indexOf(ticket);
    if (index < 0) return false;
    line.waiting.splice(index, 1);
    return true;
  }

  /** The ticket holding the session's turn, if any. */
  holder(sessionId: string): T | undefined {
    return this.lines.get(sessionId)?.holder;
  }

  /** How many tickets wait for the session's turn. */
  waiting(sessionId: string): number {
    return this.lines.get(sessionId)?.waiting.length ?? 0;
  }

  /** How many tickets wait ahead of `ticket` (its place in line), or -1 if it is not waiting. */
  placeOf(sessionId: string, ticket: T): number {
    return this.lines.get(sessionId)?.waiting.indexOf(ticket) ?? -1;
  }

  /** Calls waiting for a turn, over all sessions. */
  get totalWaiting(): number {
    let total = 0;
    for (const line of this.lines.values()) total += line.waiting.length;
    return total;
  }
}
