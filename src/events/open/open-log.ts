/**
 * Opening an event log by where it is: a `nats://…/STREAM` location is a JetStream log, anything
 * else an LMDB directory. Every reader of a log (the router, replay, `readie up`) opens it here.
 */
import { EventLogError } from '../errors.js';
import type { EventLogBackend } from '../event-log.js';
import { JetStreamEventLog, type JetStreamLogOptions } from '../jetstream/jetstream-log.js';
import { isJetStreamLocation, parseJetStreamLocation } from '../jetstream/location.js';
import { EventLog, type EventLogOptions } from '../lmdb/event-log.js';

/** How to open a log of either backend (backend-specific options apply to their backend). */
export type OpenLogOptions<S> = EventLogOptions<S> &
  Omit<JetStreamLogOptions<S>, keyof EventLogOptions<S>>;

/** Opens the log at `location` (a directory, or `nats://HOST:PORT[,…]/STREAM`). */
export async function openEventLog<S = never>(
  location: string,
  options: OpenLogOptions<S> = {},
): Promise<EventLogBackend<S>> {
  if (location.trim() === '') throw new EventLogError('no event log location given');
  if (isJetStreamLocation(location)) {
    return JetStreamEventLog.open<S>(parseJetStreamLocation(location), options);
  }
  return EventLog.open<S>(location, options);
}
