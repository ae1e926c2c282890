/** The worker's pino logger: JSON lines with the worker's ID; never payload bytes or tokens. */
import { pino, type Logger } from 'pino';

/** A logger for worker `workerId` at `level` (LOG_LEVEL, default info). */
export function workerLogger(workerId: string, level = 'info'): Logger {
  return pino({
    level,
    base: { workerId },
    redact: {
      paths: ['authToken', '*.authToken', 'authorization', '*.authorization'],
      remove: true,
    },
  });
}
