/** Mocha root hooks: no test leaves a child process behind to keep the run from ending. */
import { killStrayChildren, trackTestChildren } from './processes.js';

export const mochaHooks = {
  beforeEach(): void {
    trackTestChildren();
  },
  afterEach(): void {
    killStrayChildren();
  },
};
