/**
 * Where a JetStream log is: `nats://HOST:PORT[,HOST:PORT...][/STREAM]`, the NATS servers to
 * connect to (any of the cluster's nodes; the client finds the others) and the stream's name.
 */
import { EventLogError } from '../errors.js';

/** The default stream name when a location names none. */
export const DEFAULT_STREAM = 'readie';

/** A parsed JetStream location. */
export interface JetStreamLocation {
  /** `nats://host:port` of each server given. */
  readonly servers: readonly string[];
  /** The stream holding the events. */
  readonly stream: string;
}

/** Whether a `--log` value names a JetStream log rather than an LMDB directory. */
export function isJetStreamLocation(text: string): boolean {
  return /^nats:\/\//i.test(text);
}

const STREAM_NAME = /^[A-Za-z0-9_-]{1,64}$/;

/** Parses a location; throws `EventLogError` saying what a location looks like. */
export function parseJetStreamLocation(text: string): JetStreamLocation {
  const match = /^nats:\/\/([^/]+)(?:\/([^/]*))?$/i.exec(text.trim());
  const example = 'e.g. nats://10.0.0.1:4222,10.0.0.2:4222,10.0.0.3:4222/readie';
  if (!match) throw new EventLogError(`${text}: not a JetStream log location (${example})`);
  const [, hosts = '', stream = ''] = match;
  const servers = hosts.split(',').map((host) => {
    const trimmed = host.trim().replace(/^nats:\/\//i, '');
    if (!/^[^:\s]+(:\d{1,5})?$/.test(trimmed)) {
      throw new EventLogError(`${text}: "${host}" is not HOST or HOST:PORT (${example})`);
    }
    return `nats://${trimmed.includes(':') ? trimmed : `${trimmed}:4222`}`;
  });
  const name = stream === '' ? DEFAULT_STREAM : stream;
  if (!STREAM_NAME.test(name)) {
    throw new EventLogError(
      `${text}: stream name "${name}" may hold only letters, digits, "-" and "_" (${example})`,
    );
  }
  return { servers, stream: name };
}

/** The location as text, as messages and `--log` show it. */
export function formatJetStreamLocation(location: JetStreamLocation): string {
  return `nats://${location.servers.map((s) => s.replace(/^nats:\/\//, '')).join(',')}/${location.stream}`;
}
