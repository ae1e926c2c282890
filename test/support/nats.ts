/**
 * A real three-node NATS JetStream cluster on loopback for a suite (Debian's `nats-server`):
 * its own store directories, free ports and a unique cluster name, so parallel runs never meet.
 * Each test takes a stream of its own (`streamLocation()`).
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  startNatsCluster,
  type NatsCluster,
  type NatsClusterOptions,
} from '../../src/cluster/nats-cluster.js';

/** The suite's cluster, started by `useNatsCluster`'s before hook. */
export interface SuiteCluster {
  readonly cluster: NatsCluster;
  /** A `nats://…/STREAM` location on a new stream name. */
  streamLocation(prefix?: string): string;
}

/** Starts a cluster before the suite and stops it after; returns a handle filled in by then. */
export function useNatsCluster(
  nodes = 3,
  options: Omit<NatsClusterOptions, 'dir' | 'nodes'> = {},
): SuiteCluster {
  let cluster: NatsCluster | undefined;
  let dir: string | undefined;
  let count = 0;
  before(async function () {
    this.timeout(60_000);
    dir = mkdtempSync(join(tmpdir(), 'readie-nats-'));
    cluster = await startNatsCluster({ ...options, dir, nodes });
  });
  after(async () => {
    await cluster?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });
  return {
    get cluster() {
      if (!cluster) throw new Error('the NATS cluster is not started yet');
      return cluster;
    },
    streamLocation(prefix = 'test') {
      count += 1;
      const name = `${prefix}-${count}-${randomBytes(3).toString('hex')}`;
      return `${this.cluster.servers}/${name}`;
    },
  };
}
