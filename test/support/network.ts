/** Network helpers for the sandbox's tests: the host's own address, a listening server. */
import { createServer, type Server } from 'node:net';
import { networkInterfaces } from 'node:os';

/** The host's first non-loopback IPv4 address, or null when it has none. */
export function hostAddress(): string | null {
  for (const addresses of Object.values(networkInterfaces())) {
    for (const address of addresses ?? []) {
      if (address.family === 'IPv4' && !address.internal) return address.address;
    }
  }
  return null;
}

/** A TCP server on `host`, port 0, that accepts and holds connections. */
export async function listenOn(host: string): Promise<Server> {
  const server = createServer((socket) => socket.on('error', () => undefined));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, resolve);
  });
  return server;
}
