/** `HOST:PORT` addresses as the command line writes them (`0.0.0.0:50051`, `[::1]:0`). */
import { ConfigError } from '../../shared/config.js';
import { parseHostPort as parseAddress, type HostPort } from '../../shared/host-port.js';
import { RouterConfigError } from '../../core/errors.js';

export type { HostPort } from '../../shared/host-port.js';

/** Parses `HOST:PORT` (src/shared/host-port.ts); a bad address is a RouterConfigError here. */
export function parseHostPort(text: string): HostPort {
  try {
    return parseAddress(text);
  } catch (error) {
    if (error instanceof ConfigError) throw new RouterConfigError(error.message);
    throw error;
  }
}

/** Writes `host:port` back as the command line would (IPv6 hosts in brackets). */
export function formatHostPort({ host, port }: HostPort): string {
  return `${host.includes(':') ? `[${host}]` : host}:${port}`;
}
