/** Worker liveness: the pure reaper and probe outcomes, and the timers that drive them. */
export * from './reaper.js';
export * from './probe-outcome.js';
export { Prober, type ProberOptions } from './prober.js';
export { ReaperTimer, type ReaperTimerOptions } from './reaper-timer.js';
