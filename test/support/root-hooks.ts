/**
 * Mocha root hooks: no test leaves a child process behind to keep the run from ending, nor a
 * read-only handle on a log another process writes.
 */
import { closeLiveLogs } from './live-log.js';
import { killStrayChildren, trackTestChildren } from './processes.js';

export const mochaHooks = {
  beforeEach(): void {
    trackTestChildren();
  },
  async afterEach(): Promise<void> {
    killStrayChildren();
    await closeLiveLogs();
  },
};
