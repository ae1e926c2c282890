/**
 * A TCP relay on loopback that a test can cut: a network partition between one client (a router)
 * and the real server behind it (a NATS node). `cut()` stops carrying bytes either way, silently,
 * as a partition does (connections stay open, nothing arrives; new ones are accepted and carry
 * nothing); `heal()` delivers what was held back and carries on.
 */
import { connect, createServer, type Server, type Socket } from 'node:net';

/** A running relay. */
export interface TcpCut {
  /** `127.0.0.1:PORT`, where clients connect instead of the server. */
  readonly address: string;
  cut(): void;
  heal(): void;
  /** Closes every connection it carries (new ones are still accepted). */
  drop(): void;
  close(): Promise<void>;
}

interface Pair {
  readonly client: Socket;
  readonly upstream: Socket;
}

/** Starts a relay to `targetHost:targetPort`. */
export async function startTcpCut(targetHost: string, targetPort: number): Promise<TcpCut> {
  let flowing = true;
  const pairs = new Set<Pair>();
  const flow = ({ client, upstream }: Pair) => {
    client.pipe(upstream);
    upstream.pipe(client);
  };
  const hold = ({ client, upstream }: Pair) => {
    client.unpipe(upstream);
    upstream.unpipe(client);
    client.pause();
    upstream.pause();
  };
  const server: Server = createServer((client) => {
    const upstream = connect(targetPort, targetHost);
    const pair = { client, upstream };
    pairs.add(pair);
    for (const socket of [client, upstream]) socket.on('error', () => undefined);
    client.on('close', () => {
      upstream.destroy();
      pairs.delete(pair);
    });
    upstream.on('close', () => client.destroy());
    if (flowing) flow(pair);
    else hold(pair);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return {
    address: `127.0.0.1:${address.port}`,
    cut: () => {
      flowing = false;
      for (const pair of pairs) hold(pair);
    },
    heal: () => {
      flowing = true;
      for (const pair of pairs) flow(pair);
    },
    drop: () => {
      for (const { client, upstream } of pairs) {
        client.destroy();
        upstream.destroy();
      }
    },
    close: async () => {
      for (const { client, upstream } of pairs) {
        client.destroy();
        upstream.destroy();
      }
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
