/**
 * The router's structured logs: pino JSON, one object a line. Call lines carry `requestId`,
 * `sessionId`, `workerId` and `tenantId`; worker lines carry `workerId`. Payload bytes are never logged, and
 * anything that looks like a credential is redacted (options shared with the worker:
 * `src/shared/log-options.ts`).
 */
import { pino, type DestinationStream, type Logger } from 'pino';
import { logOptions } from '../../shared/log-options.js';

export type { Logger } from 'pino';

/** A JSON logger at `level`, writing to `destination` (default: standard output). */
export function createLogger(level = 'info', destination?: DestinationStream): Logger {
  const options = logOptions('readie-router', level, pino.stdTimeFunctions.isoTime);
  return destination ? pino(options, destination) : pino(options);
}

/** The IDs every line about one call carries. */
export interface CallLogIds {
  readonly requestId: string;
  readonly sessionId: string | null;
  readonly workerId: string | null;
  /** The tenant the caller's credential names; null without one. */
  readonly tenantId: string | null;
}

/**
 * A child logger whose every line names the call. Call lines carry the fields the call shell
 * names (IDs, codes, sizes, durations, placement's explanation; never a credential or payload), so
 * they skip the redaction pass, which costs about as much as the rest of the line.
 */
export function callLogger(logger: Logger, ids: CallLogIds): Logger {
  return logger.child(
    {
      requestId: ids.requestId,
      sessionId: ids.sessionId,
      workerId: ids.workerId,
      tenantId: ids.tenantId,
    },
    { redact: NO_REDACTION },
  );
}

const NO_REDACTION = { paths: [] as string[], censor: '' };
