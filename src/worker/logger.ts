/**
 * The worker's pino logger: JSON lines in the router's format (`src/shared/log-options.ts`: level
 * names, ISO times, a `service` field) with the worker's ID on every line; never payload bytes or
 * tokens.
 */
import { pino, type Logger } from 'pino';
import { logOptions } from '../shared/log-options.js';

/** A logger for worker `workerId` at `level` (LOG_LEVEL, default info). */
export function workerLogger(workerId: string, level = 'info'): Logger {
  return pino(logOptions('readie-worker', level, pino.stdTimeFunctions.isoTime, { workerId }));
}
