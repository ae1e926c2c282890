/**
 * Upcasting: bringing events written under an older schema version up to the current one, so
 * old logs stay replayable. v1 is the first version, so today this only refuses logs from the
 * future; a v2 adds its conversions here, one function per version step.
 */
import { EventLogError } from './errors.js';
import { EVENT_SCHEMA_VERSION } from './schema.js';

/** Raw event objects of a log written under `version`, brought to the current version. */
export function upcaster(version: number): (raw: unknown) => unknown {
  if (!Number.isInteger(version) || version < 1) {
    throw new EventLogError(`schema version ${String(version)} is not a version`);
  }
  if (version > EVENT_SCHEMA_VERSION) {
    throw new EventLogError(
      `the log was written with event schema v${version}; this readie reads up to v${EVENT_SCHEMA_VERSION}`,
    );
  }
  return (raw) => raw;
}
