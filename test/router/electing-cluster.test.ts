/**
 * A router started beside a NATS cluster that is still electing: a restarted cluster with only
 * one of its three nodes up (no meta leader, no stream leader) until the test brings the others
 * back. The router waits, saying so, and leads once a majority answers; with nobody coming back
 * it fails after `--log-wait` with a message that says what to check. Real nats-server nodes.
 */
import { expect } from 'chai';
import { Kvm } from '@nats-io/kv';
import { connect } from '@nats-io/transport-node';
import type { ClusterWaitReport } from '../../src/events/index.js';
import { streamNames } from '../../src/events/jetstream/stream-format.js';
import { LeaderLease } from '../../src/router/leadership/index.js';
import { useNatsCluster } from '../support/nats.js';
import { spawnRouter } from '../support/jetstream-routers.js';
import type { Child } from '../support/processes.js';
import { eventually } from '../support/router/harness.js';

async function stop(child: Child): Promise<void> {
  if (child.process.exitCode === null && child.process.signalCode === null) {
    child.process.kill('SIGTERM');
  }
  await child.exited;
}

describe('a router beside a NATS cluster that is still electing (real three-node cluster)', function () {
  this.timeout(180_000);
  const nats = useNatsCluster();

  /**
   * Restarts the cluster with node 1 alone: node 1 comes back with its store but no peer to vote
   * with, so nothing has a leader (stopping two nodes of a running cluster would leave a leader
   * that answers some requests until it notices it lost its quorum).
   */
  const leaveOneNode = async () => {
    for (const index of [0, 1, 2]) await nats.cluster.stopNode(index);
    nats.cluster.startNode(0);
  };
  const restoreNodes = () => {
    for (const index of [0, 1, 2]) {
      const node = nats.cluster.nodes[index];
      if (node && (node.process.exitCode !== null || node.process.signalCode !== null)) {
        nats.cluster.startNode(index);
      }
    }
  };
  afterEach(restoreNodes);

  /** A log and lease bucket that exist (a first router led on them), as on a restart. */
  async function existingLog(prefix: string): Promise<string> {
    const location = nats.streamLocation(prefix);
    const first = spawnRouter(location, 'router-a');
    try {
      await first.waitFor(/took the lead/, 90_000);
    } finally {
      await stop(first);
    }
    return location;
  }

  it('waits while one node of three is up, says so, and leads once the others are back', async () => {
    const location = await existingLog('electing');
    await leaveOneNode();
    const router = spawnRouter(location, 'router-b');
    try {
      const waiting = await router.waitFor(/router waiting for the NATS cluster/, 60_000);
      const line = JSON.parse(waiting) as { level: string; problem: string; waitMs: number };
      expect(line.level).to.equal('warn');
      expect(line.waitMs).to.equal(120_000);
      expect(line.problem).to.match(/timeout|unavailable|no responders|not enabled/i);
      expect(router.process.exitCode, 'still waiting').to.equal(null);
      restoreNodes();
      await router.waitFor(/took the lead/, 120_000);
      expect(router.process.exitCode).to.equal(null);
    } finally {
      await stop(router);
    }
  });

  it('opens the lease bucket once its stream has a leader again, instead of failing on the first timeout', async () => {
    const location = await existingLog('lease');
    const bucket = streamNames(location.slice(location.lastIndexOf('/') + 1)).leaseBucket;
    await leaveOneNode();
    const nc = await connect({
      servers: nats.cluster.nodes.map((node) => node.url),
      // Node 1 is still restarting.
      waitOnFirstConnect: true,
    });
    try {
      const reports: ClusterWaitReport[] = [];
      let led: () => void = () => undefined;
      const leading = new Promise<void>((resolve) => (led = resolve));
      const lease = await LeaderLease.open({
        connection: nc,
        bucket,
        replicas: 3,
        leaseMs: 2_000,
        me: { routerId: 'router-c', address: '127.0.0.1:1' },
        clock: Date.now,
        onLeading: () => led(),
        onLost: () => undefined,
        wait: {
          waitMs: 120_000,
          onWait: (report) => {
            reports.push(report);
            // The cluster comes back only once the open has had to wait.
            restoreNodes();
          },
        },
      });
      expect(reports.length, 'the open waited').to.be.at.least(1);
      expect(reports[0]?.what).to.equal(`open the leader lease (bucket ${bucket})`);
      expect(reports[0]?.problem).to.match(/timeout|unavailable|no responders|not enabled/i);
      // The lease works: the first router released it on stopping, so this one takes it.
      lease.start();
      await leading;
      expect(lease.isLeader).to.equal(true);
      const entry = await (await new Kvm(nc).open(bucket)).get('leader');
      expect(entry?.string()).to.contain('router-c');
      await lease.stop(true);
    } finally {
      await nc.close();
    }
  });

  it('a standby that cannot read the lease says why, at most once a lease period', async () => {
    const location = await existingLog('silent');
    const bucket = streamNames(location.slice(location.lastIndexOf('/') + 1)).leaseBucket;
    const nc = await connect({ servers: nats.cluster.nodes.map((node) => node.url) });
    // When each failure was told, by the lease's own clock: the reading it took to decide.
    let now = 0;
    const clock = () => (now = Date.now());
    const told: { why: string; at: number }[] = [];
    let lease: LeaderLease | undefined;
    let holding = true;
    let renewals: Promise<void> | undefined;
    try {
      // Another router holds the lease and renews it until the cluster goes: this one waits.
      const kv = await new Kvm(nc).open(bucket);
      const holder = JSON.stringify({ routerId: 'router-x', address: '127.0.0.1:2' });
      await kv.put('leader', holder);
      renewals = (async () => {
        while (holding) {
          await kv.put('leader', holder).catch(() => undefined);
          await new Promise((resolve) => setTimeout(resolve, 200));
        }
      })();
      lease = await LeaderLease.open({
        connection: nc,
        bucket,
        replicas: 3,
        leaseMs: 12_000,
        me: { routerId: 'router-c', address: '127.0.0.1:1' },
        clock,
        onLeading: () => undefined,
        onLost: () => undefined,
        onContendFailed: (why) => told.push({ why, at: now }),
      });
      lease.start();
      const standing = lease;
      await eventually(() => standing.holder?.routerId === 'router-x', 'the lease read');
      expect(told, 'nothing to tell while the lease reads').to.deep.equal([]);
      // The cluster goes away: every read fails from now on.
      for (const index of [0, 1, 2]) await nats.cluster.stopNode(index);
      holding = false;
      await eventually(() => told.length >= 2, 'a second failure told', 60_000);
      expect(told[0]?.why).to.match(/^the lease could not be read: \S/);
      // A read fails every 6 s or so (a tenth of the lease between reads, then the request's
      // 5 s timeout): it tells once a lease period at most.
      expect(told[1]!.at - told[0]!.at).to.be.at.least(12_000);
      expect(lease.isLeader).to.equal(false);
    } finally {
      holding = false;
      await lease?.stop(false);
      await renewals;
      await nc.close().catch(() => undefined);
    }
  });

  it('gives up after --log-wait, exit 1, one line that says what to check', async () => {
    const location = await existingLog('gives-up');
    await leaveOneNode();
    const router = spawnRouter(location, 'router-b', { extra: ['--log-wait', '2s'] });
    const { code } = await router.exited;
    const stderr = router.stderr();
    expect(code, stderr).to.equal(1);
    const lines = stderr.trimEnd().split('\n');
    expect(lines, stderr).to.have.length(1);
    expect(lines[0]).to.match(
      /^readie router: could not start: could not open the event log nats:\/\/\S+: the NATS cluster did not answer JetStream requests within 2 s \(last: [^)]+\)\. Check that a majority of its nodes run/,
    );
    expect(lines[0]).to.contain('--log-wait sets how long to wait');
  });
});
