/** Worker liveness (shell): the timers that run the core's probe outcomes and reaper. */
export { Prober, type ProberOptions } from './prober.js';
export { ReaperTimer, type ReaperTimerOptions } from './reaper-timer.js';
