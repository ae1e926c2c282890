/** Errors raised when a log cannot be read as the event vocabulary says. */

/** Where in a log a bad event sits: its seq when known, and its JSONL line when read from one. */
export interface EventLocation {
  readonly seq?: number | undefined;
  readonly line?: number | undefined;
}

function describeLocation(location: EventLocation): string {
  const parts: string[] = [];
  if (location.line !== undefined) parts.push(`line ${location.line}`);
  if (location.seq !== undefined) parts.push(`seq ${location.seq}`);
  return parts.length > 0 ? parts.join(', ') : 'event';
}

/**
 * An event that does not fit the vocabulary: unparseable, unknown type, missing or mistyped field,
 * or out of order. The message names the seq or line and the field.
 */
export class InvalidEventError extends Error {
  override readonly name = 'InvalidEventError';
  readonly seq: number | undefined;
  readonly line: number | undefined;
  readonly field: string | undefined;

  constructor(location: EventLocation, field: string | undefined, problem: string) {
    super(
      `${describeLocation(location)}: ${field === undefined ? '' : `field "${field}": `}${problem}`,
    );
    this.seq = location.seq;
    this.line = location.line;
    this.field = field;
  }
}

/** A log (LMDB directory) that cannot be opened as asked: locked, missing, of a newer schema. */
export class EventLogError extends Error {
  override readonly name: string = 'EventLogError';
}

/** The log's writer lock is held by another live process: one writer per log. */
export class LogLockedError extends EventLogError {
  override readonly name = 'LogLockedError';
}
