/** The calls running now, so a leaving worker can refuse new ones and wait for the rest. */
import { ShuttingDownError } from '../core/errors.js';

/** Counts running calls. */
export class CallTracker {
  private running = 0;
  private leaving = false;
  private idleWaiters: (() => void)[] = [];

  /** How many calls run now. */
  get size(): number {
    return this.running;
  }

  /** Registers a new call; throws ShuttingDownError once the worker is leaving. */
  begin(): () => void {
    if (this.leaving)
      throw new ShuttingDownError('the worker is shutting down and takes no new calls');
    this.running += 1;
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      this.running -= 1;
      if (this.running === 0) for (const wake of this.idleWaiters.splice(0)) wake();
    };
  }

  /** Refuses new calls from now on; resolves once the running ones have ended. */
  drain(): Promise<void> {
    this.leaving = true;
    if (this.running === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }
}
