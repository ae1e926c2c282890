/**
 * A JetStream cluster of `nats-server` processes on loopback (Debian's `nats-server` package),
 * each with its own store directory, client port and cluster port: what `readie up --log
 * jetstream` and the tests run the event log on. Ports are free ones picked at start; server and
 * cluster names carry a random suffix, so runs side by side on one machine never meet.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, mkdirSync, openSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';

/** How to start a NATS cluster. */
export interface NatsClusterOptions {
  /** Directory for each node's store, config and log (`node-1/` ...). */
  readonly dir: string;
  /** How many nodes (3 for a replicated R3 stream). Default 3. */
  readonly nodes?: number;
  /** The `nats-server` binary. Default `nats-server` on PATH. */
  readonly binary?: string;
  /** How long to wait for JetStream to have a meta leader, in ms. Default 60 s. */
  readonly readyTimeout?: number;
  /** Client ports to use (default: free ones); a restarted cluster passes the old ones. */
  readonly ports?: readonly number[];
  /** Cluster ports to use (default: free ones). */
  readonly clusterPorts?: readonly number[];
  /** The cluster's name (default: `readie-` and a random suffix). */
  readonly name?: string;
  /**
   * Each node in its own process group (`readie up`: a Ctrl-C at the terminal reaches only the
   * parent, which stops the nodes last, after the routers). Default false.
   */
  readonly detached?: boolean;
  /**
   * Nodes do not tell clients the other nodes' addresses (`no_advertise`): a client stays on the
   * servers it was given (a test that cuts one client off through a proxy). Default false.
   */
  readonly noAdvertise?: boolean;
}

/** One running node. */
export interface NatsNode {
  readonly name: string;
  readonly url: string;
  readonly port: number;
  readonly clusterPort: number;
  readonly storeDir: string;
  readonly process: ChildProcess;
  readonly exited: Promise<number | null>;
}

/** A running NATS cluster. */
export interface NatsCluster {
  readonly name: string;
  readonly nodes: readonly NatsNode[];
  /** Every node's client address: `nats://HOST:PORT,HOST:PORT,...`, a log location's start. */
  readonly servers: string;
  /** Stops one node (SIGKILL when `kill`, else SIGTERM) and waits for it to exit. */
  stopNode(index: number, kill?: boolean): Promise<void>;
  /** Starts a stopped node again with its store, ports and name. */
  startNode(index: number): NatsNode;
  /** Stops every node and waits. */
  stop(): Promise<void>;
}

/** `nats-server` is missing or its cluster did not come up. */
export class NatsClusterError extends Error {
  override readonly name = 'NatsClusterError';
}

/** Whether `nats-server` runs here (Debian: `apt-get install -y nats-server`). */
export function natsServerAvailable(binary = 'nats-server'): boolean {
  return spawnSync(binary, ['--version'], { stdio: 'ignore' }).status === 0;
}

/** A TCP port that was free a moment ago on 127.0.0.1. */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

/** Starts the cluster; resolves once JetStream has a meta leader (streams elect theirs later). */
export async function startNatsCluster(options: NatsClusterOptions): Promise<NatsCluster> {
  const count = options.nodes ?? 3;
  const binary = options.binary ?? 'nats-server';
  if (!natsServerAvailable(binary)) {
    throw new NatsClusterError(
      `${binary} is not installed: install it with apt-get install -y nats-server`,
    );
  }
  const name = options.name ?? `readie-${randomBytes(4).toString('hex')}`;
  const ports = options.ports ?? (await Promise.all(range(count).map(() => freePort())));
  const clusterPorts =
    options.clusterPorts ?? (await Promise.all(range(count).map(() => freePort())));
  const routes = clusterPorts.map((port) => `nats-route://127.0.0.1:${port}`);
  const nodes: (NatsNode | undefined)[] = [];
  const launch = (index: number): NatsNode => {
    const nodeName = `${name}-${index + 1}`;
    const nodeDir = join(options.dir, `node-${index + 1}`);
    const storeDir = join(nodeDir, 'store');
    mkdirSync(storeDir, { recursive: true, mode: 0o700 });
    const port = ports[index] as number;
    const clusterPort = clusterPorts[index] as number;
    const configFile = join(nodeDir, 'nats.conf');
    writeFileSync(
      configFile,
      [
        `server_name: "${nodeName}"`,
        `listen: "127.0.0.1:${port}"`,
        `jetstream { store_dir: "${storeDir}" }`,
        `cluster {`,
        `  name: "${name}"`,
        `  listen: "127.0.0.1:${clusterPort}"`,
        `  routes: [${routes.filter((_, i) => i !== index).join(', ')}]`,
        ...(options.noAdvertise ? ['  no_advertise: true'] : []),
        `}`,
        '',
      ].join('\n'),
      { mode: 0o600 },
    );
    const fd = openSync(join(nodeDir, 'nats.log'), 'a', 0o600);
    const child = spawn(binary, ['-c', configFile], {
      stdio: ['ignore', fd, fd],
      detached: options.detached ?? false,
    });
    closeSync(fd);
    const exited = new Promise<number | null>((done) => child.on('exit', (code) => done(code)));
    const node: NatsNode = {
      name: nodeName,
      url: `nats://127.0.0.1:${port}`,
      port,
      clusterPort,
      storeDir,
      process: child,
      exited,
    };
    nodes[index] = node;
    return node;
  };
  for (const index of range(count)) launch(index);
  const stopNode = async (index: number, kill = false): Promise<void> => {
    const node = nodes[index];
    if (!node || node.process.exitCode !== null || node.process.signalCode !== null) return;
    node.process.kill(kill ? 'SIGKILL' : 'SIGTERM');
    await node.exited;
  };
  const cluster: NatsCluster = {
    name,
    get nodes() {
      return nodes.filter((node): node is NatsNode => node !== undefined);
    },
    servers: `nats://${ports.map((port) => `127.0.0.1:${port}`).join(',')}`,
    stopNode,
    startNode: launch,
    stop: async () => {
      await Promise.all(range(count).map((index) => stopNode(index)));
    },
  };
  try {
    await waitForJetStream(cluster, options.readyTimeout ?? 60_000);
  } catch (error) {
    await cluster.stop();
    throw error;
  }
  return cluster;
}

/**
 * Waits until the cluster has a JetStream meta leader: only the meta leader answers the list of
 * stream names (any node answers account info, even before an election). A restarted cluster's
 * streams and buckets elect their own leaders seconds later: the router waits for those.
 */
async function waitForJetStream(cluster: NatsCluster, timeoutMs: number): Promise<void> {
  const { connect } = await import('@nats-io/transport-node');
  const { jetstreamManager } = await import('@nats-io/jetstream');
  const deadline = Date.now() + timeoutMs;
  let problem = 'no answer';
  while (Date.now() < deadline) {
    for (const node of cluster.nodes) {
      if (node.process.exitCode !== null) {
        throw new NatsClusterError(`nats-server ${node.name} exited with ${node.process.exitCode}`);
      }
    }
    try {
      const nc = await connect({ servers: cluster.nodes.map((node) => node.url), timeout: 1_000 });
      try {
        const jsm = await jetstreamManager(nc, { timeout: 2_000 });
        await jsm.getAccountInfo();
        await jsm.streams.names().next();
        return;
      } finally {
        await nc.close();
      }
    } catch (error) {
      problem = error instanceof Error ? error.message : String(error);
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new NatsClusterError(
    `the NATS cluster ${cluster.name} did not offer JetStream within ${timeoutMs} ms (${problem})`,
  );
}

function range(count: number): number[] {
  return Array.from({ length: count }, (_, i) => i);
}
