/** `HOST:PORT` addresses as the command line writes them (`0.0.0.0:50051`, `[::1]:0`). */
import { ConfigError } from './config.js';

/** A host and a port. */
export interface HostPort {
  readonly host: string;
  readonly port: number;
}

/** Parses `HOST:PORT` (IPv6 hosts in brackets); port 0 asks the OS for a free port. */
export function parseHostPort(text: string): HostPort {
  const match = /^(?:\[([^\]]+)\]|([^:[\]]+)):(\d{1,5})$/.exec(text.trim());
  const port = Number(match?.[3]);
  if (!match || port > 65_535) {
    throw new ConfigError(
      `"${text}" is not an address: use HOST:PORT, e.g. 0.0.0.0:50051 or [::1]:50051`,
    );
  }
  return { host: match[1] ?? match[2] ?? '', port };
}
