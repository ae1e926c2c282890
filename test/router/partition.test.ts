/**
 * A leader cut off from NATS while it still runs (a silent partition through a TCP relay in
 * front of the one real nats-server node it may use): it stops serving and writing, the standby
 * takes over within LEADER_LEASE plus one probe interval, the append the old leader made before
 * the cut is refused once the partition heals (LogFencedError), it stands by again instead of
 * leading a fork, and `replay verify` passes on the whole log.
 */
import { expect } from 'chai';
import { credentials } from '@grpc/grpc-js';
import { ProxyServiceClient } from '../../src/proto/gen/readie/v1/proxy.js';
import { checkHealth } from '../support/health-client.js';
import {
  type ChildRouter,
  eventuallyAsync,
  killRouter,
  LEASE_MS,
  PROBE_MS,
  readLog,
  startChildRouter,
} from '../support/jetstream-routers.js';
import { useNatsCluster } from '../support/nats.js';
import { replayCli } from '../support/replay.js';
import { codeOf, finishedLog, run, storyOf, type CallOutcome } from '../support/router/harness.js';
import { ScriptedWorker } from '../support/router/scripted-worker.js';
import { startTcpCut, type TcpCut } from '../support/tcp-cut.js';

describe('a leader partitioned from NATS while it runs (real three-node NATS cluster)', function () {
  this.timeout(180_000);
  // Nodes do not advertise each other to clients: the cut-off router cannot reconnect around the
  // partition to another node.
  const nats = useNatsCluster(3, { noAdvertise: true });
  const routers: ChildRouter[] = [];
  let relay: TcpCut | undefined;
  let worker: ScriptedWorker | undefined;

  afterEach(async () => {
    worker?.stop();
    for (const router of routers.splice(0)) await killRouter(router);
    await relay?.close();
  });

  it('stops serving and writing, is replaced within the lease, and its late append is fenced', async () => {
    const location = nats.streamLocation('partition');
    const stream = location.slice(location.lastIndexOf('/') + 1);
    const node = nats.cluster.nodes[0]!;
    relay = await startTcpCut('127.0.0.1', node.port);
    // The old leader reaches NATS only through the relay; the standby through every node.
    const old = await startChildRouter(`nats://${relay.address}/${stream}`, 'router-a');
    routers.push(old);
    await old.child.waitFor(/took the lead/, 30_000);
    const standby = await startChildRouter(location, 'router-b');
    routers.push(standby);
    await standby.child.waitFor(/standing by/, 30_000);
    worker = await ScriptedWorker.start({ workerId: 'w1' });
    await worker.connect(old.address).reportStatus();
    const oldClient = new ProxyServiceClient(old.address, credentials.createInsecure());
    const standbyClient = new ProxyServiceClient(standby.address, credentials.createInsecure());
    try {
      expect(codeOf(await run(oldClient, 'echo', { requestId: 'before-cut' }))).to.equal('OK');
      // The call was answered before its events committed: they reach the stream before the cut.
      await finishedLog(location, ['before-cut']);

      relay.cut();
      const cutAt = Date.now();
      // A call the old leader takes while cut off: its CallRequested is appended into the void.
      const late: Promise<CallOutcome> = run(
        oldClient,
        'echo',
        { requestId: 'during-cut' },
        { deadline: Date.now() + 30_000 },
      );
      await standby.child.waitFor(/took the lead/, 30_000);
      const tookOverAfter = Date.now() - cutAt;
      expect(tookOverAfter, 'ms from the cut to the takeover').to.be.below(
        LEASE_MS + PROBE_MS + 1_000,
      );
      // The old leader stopped serving before the standby took over.
      expect(old.child.lines.join('\n')).to.match(/router lost the lease: it steps down/);
      // The call taken during the cut may have been relayed (the router does not wait for its
      // appends to commit before it relays); whatever it answered, its events never land.
      await late;
      expect(await checkHealth(old.address).catch(() => 'unreachable')).to.not.equal('SERVING');
      const refused = await run(oldClient, 'echo', { requestId: 'to-the-old-leader' });
      expect(codeOf(refused)).to.equal('UNAVAILABLE');

      // The new leader serves.
      worker.connect(standby.address);
      await eventuallyAsync(
        async () => codeOf(await run(standbyClient, 'echo')) === 'OK',
        'the new leader to serve',
        15_000,
      );

      // The partition heals: what the old leader sent before the cut reaches the stream and is
      // refused by the fence, and the old leader stands by again (it does not lead a fork).
      relay.heal();
      await old.child.waitFor(/"type":"LogFencedError"/, 45_000);
      await old.child.waitFor(/standing by/, 45_000);
      // Standing by, it refuses calls, and names the new leader once it has read the lease.
      let afterHeal: CallOutcome | undefined;
      await eventuallyAsync(
        async () => {
          afterHeal = await run(oldClient, 'echo', { requestId: 'after-heal' });
          expect(codeOf(afterHeal)).to.equal('UNAVAILABLE');
          return afterHeal.error?.metadata.get('readie-leader')[0] === standby.address;
        },
        'the old leader to name the new one',
        10_000,
      );
      expect(codeOf(await run(standbyClient, 'echo'))).to.equal('OK');

      const events = await readLog(location);
      expect(events.map((e) => e.seq)).to.deep.equal(events.map((_, i) => i + 1));
      expect(storyOf(events, 'before-cut')).to.include('CallFinished');
      expect(storyOf(events, 'during-cut'), 'the fenced append left nothing').to.deep.equal([]);
      expect(storyOf(events, 'to-the-old-leader')).to.deep.equal([]);
      const starts = events.filter((e) => e.type === 'RouterStarted');
      expect(starts.map((e) => [e.routerId, e.takeoverFrom])).to.deep.equal([
        ['router-a', null],
        ['router-b', 'router-a'],
      ]);
      const verify = replayCli('verify', location);
      expect(verify.status, verify.stdout + verify.stderr).to.equal(0);
    } finally {
      oldClient.close();
      standbyClient.close();
    }
  });
});
