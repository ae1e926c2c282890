/**
 * The router's structured logs: pino JSON, one object a line. Call lines carry `requestId`,
 * `sessionId` and `workerId`; worker lines carry `workerId`. Payload bytes are never logged, and
 * anything that looks like a credential is redacted.
 */
import { pino, type DestinationStream, type Logger } from 'pino';

export type { Logger } from 'pino';

/** Keys redacted wherever they appear (one level deep), so a token can never reach a log line. */
const REDACTED = [
  'authorization',
  'token',
  'authToken',
  'password',
  '*.authorization',
  '*.token',
  '*.authToken',
];

/** A JSON logger at `level`, writing to `destination` (default: standard output). */
export function createLogger(level = 'info', destination?: DestinationStream): Logger {
  const options = {
    level,
    base: { service: 'readie-router' },
    timestamp: pino.stdTimeFunctions.isoTime,
    redact: { paths: REDACTED, censor: '[redacted]' },
    formatters: { level: (label: string) => ({ level: label }) },
  };
  return destination ? pino(options, destination) : pino(options);
}

/** The IDs every line about one call carries. */
export interface CallLogIds {
  readonly requestId: string;
  readonly sessionId: string | null;
  readonly workerId: string | null;
}

/** A child logger whose every line names the call. */
export function callLogger(logger: Logger, ids: CallLogIds): Logger {
  return logger.child({
    requestId: ids.requestId,
    sessionId: ids.sessionId,
    workerId: ids.workerId,
  });
}
