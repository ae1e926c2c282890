/** Mocha root hooks: no test leaves a child process behind to keep the run from ending. */
import { killStrayChildren } from './processes.js';

export const mochaHooks = {
  afterEach(): void {
    killStrayChildren();
  },
};
