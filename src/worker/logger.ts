/**
 * The worker's pino logger: JSON lines in the router's format (level names, ISO times, a `service`
 * field) with the worker's ID on every line; never payload bytes or tokens.
 */
import { pino, type Logger } from 'pino';

/** A logger for worker `workerId` at `level` (LOG_LEVEL, default info). */
export function workerLogger(workerId: string, level = 'info'): Logger {
  return pino({
    level,
    base: { service: 'readie-worker', workerId },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label: string) => ({ level: label }) },
    redact: {
      paths: ['authToken', '*.authToken', 'authorization', '*.authorization', 'token', '*.token'],
      censor: '[redacted]',
    },
  });
}
