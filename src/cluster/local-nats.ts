/**
 * The NATS JetStream cluster of `readie up --log jetstream`: three `nats-server` nodes on loopback
 * under `<state-dir>/nats/` (`node-1/store`, ...), started with the cluster name and ports of the
 * previous run when there was one (`cluster.json`), so their stores and the stream in them carry
 * over from one `readie up` to the next.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { NatsClusterError, startNatsCluster, type NatsCluster } from './nats-cluster.js';

/** The stream the local cluster's event log is on. */
export const LOCAL_STREAM = 'readie';

/** What a run remembers of its NATS cluster for the next one. */
interface SavedCluster {
  readonly name: string;
  readonly ports: readonly number[];
  readonly clusterPorts: readonly number[];
}

function readSaved(file: string): SavedCluster | undefined {
  if (!existsSync(file)) return undefined;
  try {
    const saved = JSON.parse(readFileSync(file, 'utf8')) as Partial<SavedCluster>;
    const ports = (list: unknown): list is number[] =>
      Array.isArray(list) && list.length === 3 && list.every((p) => Number.isInteger(p));
    if (typeof saved.name === 'string' && ports(saved.ports) && ports(saved.clusterPorts)) {
      return saved as SavedCluster;
    }
  } catch {
    // Unreadable: start afresh below (the stores keep the stream only under the same name).
  }
  throw new NatsClusterError(
    `${file} is not a NATS cluster description readie wrote: remove ${join(file, '..')} to start a new cluster (its log is lost)`,
  );
}

/** Starts (or restarts) the local NATS cluster under `stateDir/nats`. */
export async function startLocalNats(stateDir: string, binary?: string): Promise<NatsCluster> {
  const dir = join(stateDir, 'nats');
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const file = join(dir, 'cluster.json');
  const saved = readSaved(file);
  const cluster = await startNatsCluster({
    dir,
    nodes: 3,
    detached: true,
    ...(binary === undefined ? {} : { binary }),
    ...(saved ?? {}),
  });
  if (!saved) {
    const record: SavedCluster = {
      name: cluster.name,
      ports: cluster.nodes.map((node) => node.port),
      clusterPorts: cluster.nodes.map((node) => node.clusterPort),
    };
    writeFileSync(file, `${JSON.stringify(record, null, 2)}\n`, { mode: 0o600 });
  }
  return cluster;
}
