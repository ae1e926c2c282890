/** A real three-node NATS JetStream cluster on loopback for a benchmark, and logs on it. */
import { randomBytes } from 'node:crypto';
import { startNatsCluster, type NatsCluster } from '../src/cluster/nats-cluster.js';
import { openEventLog, type EventLogBackend, type OpenLogOptions } from '../src/events/index.js';
import { withTempDir } from './support.js';

/** Runs `body` with a started cluster (its own temp dir), stopped afterwards. */
export async function withNatsCluster<T>(body: (cluster: NatsCluster) => Promise<T>): Promise<T> {
  return withTempDir(async (dir) => {
    const cluster = await startNatsCluster({ dir });
    try {
      return await body(cluster);
    } finally {
      await cluster.stop();
    }
  });
}

/** Opens a JetStream log on a new R3 stream of `cluster`. */
export function openStreamLog<S>(
  cluster: NatsCluster,
  options: OpenLogOptions<S>,
): Promise<EventLogBackend<S>> {
  return openEventLog<S>(`${cluster.servers}/bench-${randomBytes(4).toString('hex')}`, options);
}
