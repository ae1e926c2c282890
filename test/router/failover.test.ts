import { expect } from 'chai';
import { credentials } from '@grpc/grpc-js';
import { fold } from '../../src/projections/index.js';
import { ProxyServiceClient } from '../../src/proto/gen/readie/v1/proxy.js';
import { ContainerState } from '../../src/proto/gen/readie/v1/registry.js';
import {
  LEASE_MS,
  PROBE_MS,
  readLog,
  startChildRouter,
  type ChildRouter as StartedRouter,
} from '../support/jetstream-routers.js';
import { useNatsCluster } from '../support/nats.js';
import { replayCli } from '../support/replay.js';
import {
  codeOf,
  eventually,
  finishedLog,
  run,
  storyOf,
  type CallOutcome,
} from '../support/router/harness.js';
import { ScriptedWorker } from '../support/router/scripted-worker.js';

interface ChildRouter extends StartedRouter {
  readonly client: ProxyServiceClient;
}

/** `readie router` on a JetStream log, as a child process; resolves once it listens. */
async function startRouter(location: string, routerId: string): Promise<ChildRouter> {
  // Health checks that time out on a loaded machine must not evict the one worker (its eviction
  // would expire the session the test keeps): a failover is what is under test here.
  const router = await startChildRouter(location, routerId, {
    env: { PROBE_TIMEOUT: '10s', PROBE_FAILURE_THRESHOLD: '30' },
  });
  return {
    ...router,
    client: new ProxyServiceClient(router.address, credentials.createInsecure()),
  };
}

/** A call through an address list: a standby's (or a dead router's) refusal moves to the next. */
async function callAny(
  routers: readonly ChildRouter[],
  command: string,
  fields: Parameters<typeof run>[2] = {},
): Promise<{ outcome: CallOutcome; via: string }> {
  let last: CallOutcome | undefined;
  for (const router of routers) {
    const outcome = await run(router.client, command, fields, { deadline: Date.now() + 3_000 });
    if (codeOf(outcome) !== 'UNAVAILABLE') return { outcome, via: router.address };
    last = outcome;
  }
  return { outcome: last as CallOutcome, via: '' };
}

describe('routers on a JetStream log: a standby takes over (real three-node NATS cluster)', function () {
  this.timeout(180_000);
  const nats = useNatsCluster();

  it('serves within LEADER_LEASE after the leader is SIGKILLed, with a whole log and sessions kept', async () => {
    const location = nats.streamLocation('failover');
    const worker = await ScriptedWorker.start({ workerId: 'w1' });
    const first = await startRouter(location, 'router-a');
    await first.child.waitFor(/took the lead/, 30_000);
    const second = await startRouter(location, 'router-b');
    await second.child.waitFor(/standing by/, 30_000);
    const routers = [first, second];
    try {
      await worker.connect(first.address).reportStatus();
      // The standby refuses a call before anything runs, naming the leader.
      const refused = await run(second.client, 'echo');
      expect(codeOf(refused)).to.equal('UNAVAILABLE');
      expect(refused.error?.metadata.get('readie-leader')).to.deep.equal([first.address]);
      expect(refused.error?.metadata.get('readie-not-started')).to.deep.equal(['1']);
      expect(worker.calls).to.have.length(0);

      const pinned = await run(first.client, 'echo', { sessionId: 's-keep', requestId: 'r-pin' });
      expect(codeOf(pinned)).to.equal('OK');
      const containerId = pinned.ids.at(-1)?.containerId as string;
      await worker.reportContainer(containerId, ContainerState.CONTAINER_STATE_READY);

      // Eight clients call through the address list until told to stop.
      let stop = false;
      const answered: { requestId: string; at: number; via: string }[] = [];
      const clients = Array.from({ length: 8 }, (_, c) =>
        (async () => {
          for (let i = 0; !stop; i += 1) {
            const requestId = `c${c}-${i}`;
            const { outcome, via } = await callAny(routers, 'echo', { requestId });
            if (codeOf(outcome) === 'OK') answered.push({ requestId, at: Date.now(), via });
            else await new Promise((resolve) => setTimeout(resolve, 100));
          }
        })(),
      );
      await eventually(() => answered.length >= 40, 'the clients to be answered', 30_000);
      const beforeKill = answered.map((a) => a.requestId);
      // A call is answered before its events commit, and the kill loses what has not committed:
      // the calls answered so far are in the log before the kill (the clients go on calling).
      await finishedLog(location, beforeKill);
      first.child.process.kill('SIGKILL');
      const killedAt = Date.now();
      await first.child.exited;
      await second.child.waitFor(/took the lead/, 30_000);
      worker.connect(second.address);
      await eventually(
        () => answered.some((a) => a.via === second.address && a.at > killedAt),
        'the standby to serve a call',
        30_000,
      );
      const servedAfter = (answered.find((a) => a.via === second.address)?.at ?? 0) - killedAt;
      stop = true;
      await Promise.all(clients);
      expect(servedAfter, 'ms from the kill to the first call the standby served').to.be.below(
        LEASE_MS + PROBE_MS + 1_000,
      );
      expect(await worker.reportUtilization(), 'the new leader knows the worker').to.equal(true);

      const events = await readLog(location);
      // No gap, no fork: seqs run 1..n, and replay re-decides the whole log the same way.
      expect(events.map((e) => e.seq)).to.deep.equal(events.map((_, i) => i + 1));
      for (const requestId of beforeKill) {
        expect(storyOf(events, requestId), requestId).to.include.members([
          'CallRequested',
          'CallPlaced',
          'CallFinished',
        ]);
      }
      const starts = events.filter((e) => e.type === 'RouterStarted');
      expect(starts.map((e) => [e.routerId, e.takeoverFrom])).to.deep.equal([
        ['router-a', null],
        ['router-b', 'router-a'],
      ]);
      const verify = replayCli('verify', location);
      expect(verify.status, verify.stdout + verify.stderr).to.equal(0);

      // The session created before the kill keeps its container.
      const state = fold(events);
      expect(state.sessions.get('s-keep')?.pin?.containerId).to.equal(containerId);
      const again = await run(second.client, 'echo again', { sessionId: 's-keep' });
      expect(codeOf(again)).to.equal('OK');
      expect(again.ids.at(-1)?.containerId).to.equal(containerId);
    } finally {
      worker.stop();
      for (const router of routers) {
        router.client.close();
        router.child.process.kill('SIGKILL');
      }
    }
  });

  it('carries on when one NATS node dies, and recovers its state from the stream after a full restart', async () => {
    const location = nats.streamLocation('restart');
    const worker = await ScriptedWorker.start({ workerId: 'w1' });
    let router = await startRouter(location, 'router-a');
    try {
      await router.child.waitFor(/took the lead/, 30_000);
      await worker.connect(router.address).reportStatus();
      const pinned = await run(router.client, 'echo', { sessionId: 's-keep' });
      expect(codeOf(pinned)).to.equal('OK');
      const containerId = pinned.ids.at(-1)?.containerId as string;

      const before = fold(await readLog(location));
      await nats.cluster.stopNode(0, true);
      let ok = 0;
      const deadline = Date.now() + 30_000;
      while (ok < 5 && Date.now() < deadline) {
        const outcome = await run(router.client, 'echo', {}, { deadline: Date.now() + 5_000 });
        if (codeOf(outcome) === 'OK') ok += 1;
      }
      expect(ok, 'calls answered with one NATS node down').to.equal(5);
      expect(router.child.process.exitCode).to.equal(null);

      // Everything stops: the router, then every NATS node; then everything starts again.
      router.child.process.kill('SIGKILL');
      await router.child.exited;
      router.client.close();
      for (const index of [0, 1, 2]) await nats.cluster.stopNode(index);
      for (const index of [0, 1, 2]) nats.cluster.startNode(index);
      router = await startRouter(location, 'router-a2');
      await router.child.waitFor(/took the lead/, 60_000);
      worker.connect(router.address);
      expect(await worker.reportUtilization(), 'the worker is known from the stream').to.equal(
        true,
      );
      const after = fold(await readLog(location));
      expect(after.sessions.get('s-keep')?.pin?.containerId).to.equal(containerId);
      expect(after.workers.size).to.equal(before.workers.size);
      const again = await run(router.client, 'echo again', { sessionId: 's-keep' });
      expect(codeOf(again)).to.equal('OK');
      expect(again.ids.at(-1)?.containerId).to.equal(containerId);
    } finally {
      worker.stop();
      router.client.close();
      router.child.process.kill('SIGKILL');
    }
  });
});
