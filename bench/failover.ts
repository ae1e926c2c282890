/**
 * Failover: time from the leader router's SIGKILL to the first call the standby serves, on a
 * JetStream log (an R3 stream of a real three-node nats-server cluster on this machine), p50 over
 * 5 runs, beside LEADER_LEASE (the bound a standby waits out by design).
 */
import { credentials } from '@grpc/grpc-js';
import { ProxyServiceClient } from '../src/proto/gen/readie/v1/proxy.js';
import { runReadie, type Child } from '../test/support/processes.js';
import { codeOf, run as call } from '../test/support/router/harness.js';
import { ScriptedWorker } from '../test/support/router/scripted-worker.js';
import { withNatsCluster } from './nats.js';
import { median, ratio } from './support.js';

const LEASE_MS = 2_000;
const RUNS = 5;

async function router(
  location: string,
  id: string,
): Promise<{ child: Child; client: ProxyServiceClient; address: string }> {
  const child = runReadie(
    [
      'router',
      '--listen',
      '127.0.0.1:0',
      '--log',
      location,
      '--router-id',
      id,
      '--insecure',
      '--auth',
      'none',
    ],
    { LEADER_LEASE: `${LEASE_MS}ms`, REAPER_INTERVAL: '1h', LOG_LEVEL: 'info' },
  );
  const line = await child.waitFor(/"msg":"router serving"/, 60_000);
  const { address } = JSON.parse(line) as { address: string };
  return {
    child,
    address,
    client: new ProxyServiceClient(address, credentials.createInsecure()),
  };
}

/** Runs the failover benchmark. */
export async function run() {
  return withNatsCluster(async (nats) => {
    const samples: number[] = [];
    for (let i = 0; i < RUNS; i += 1) {
      const location = `${nats.servers}/failover-${i}-${Date.now()}`;
      const worker = await ScriptedWorker.start({ workerId: 'w1' });
      const leader = await router(location, 'a');
      await leader.child.waitFor(/took the lead/, 30_000);
      const standby = await router(location, 'b');
      await standby.child.waitFor(/standing by/, 30_000);
      try {
        await worker.connect(leader.address).reportStatus();
        if (codeOf(await call(leader.client, 'echo')) !== 'OK') throw new Error('no first call');
        leader.child.process.kill('SIGKILL');
        const killed = performance.now();
        for (;;) {
          const outcome = await call(standby.client, 'echo', {}, { deadline: Date.now() + 2_000 });
          if (codeOf(outcome) === 'OK') break;
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
        samples.push(Math.round(performance.now() - killed));
      } finally {
        worker.stop();
        for (const r of [leader, standby]) {
          r.client.close();
          r.child.process.kill('SIGKILL');
        }
      }
    }
    const p50 = median(samples);
    return {
      leaderLeaseMs: LEASE_MS,
      runs: samples,
      p50Ms: p50,
      p50VsLease: ratio(p50, LEASE_MS),
      target: { p50AtMostMs: LEASE_MS + 2_000 },
      note: 'SIGKILL of the leading readie router to the first call the standby answers OK (a client polling it every 20 ms); both routers, the scripted worker and the three nats-server nodes share this machine',
    };
  });
}
