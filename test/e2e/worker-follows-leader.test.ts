/**
 * A real `readie worker` process started with `--router a,b` against a leading and a standby
 * router on a real three-node NATS cluster: it reports to the leader, and once the leader is
 * SIGKILLed it reports to the new leader, without a restart, keeping its session's container.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { credentials } from '@grpc/grpc-js';
import { expect } from 'chai';
import { ReadieClient } from '../../src/client/index.js';
import { AdminServiceClient, type StatusResponse } from '../../src/proto/gen/readie/v1/admin.js';
import { freePort } from '../support/e2e-cluster.js';
import {
  type ChildRouter,
  eventuallyAsync,
  killRouter,
  readLog,
  startLeaderAndStandby,
} from '../support/jetstream-routers.js';
import { useNatsCluster } from '../support/nats.js';
import { runReadie, type Child } from '../support/processes.js';
import { PYTHON } from '../support/python.js';
import { PLAIN_CATALOGUE } from '../support/real-worker.js';
import { tempDir } from '../support/temp.js';

/** The router's status (AdminService; the routers run with --auth none). */
function statusOf(address: string): Promise<StatusResponse> {
  const admin = new AdminServiceClient(address, credentials.createInsecure());
  return new Promise<StatusResponse>((resolve, reject) =>
    admin.status({ includeExpiredSessions: false }, (error, answer) => {
      admin.close();
      if (error) reject(error);
      else resolve(answer);
    }),
  ).finally(() => admin.close());
}

const ADD = { source: 'def add(x):\n    return x + 1\n', function: 'add' };

describe('a worker process with --router a,b follows the leader (real NATS, routers, worker)', function () {
  this.timeout(180_000);
  const nats = useNatsCluster();
  let leader: ChildRouter | undefined;
  let standby: ChildRouter | undefined;
  let worker: Child | undefined;

  afterEach(async () => {
    if (worker && worker.process.exitCode === null) {
      worker.process.kill('SIGKILL');
      await worker.exited;
    }
    if (leader) await killRouter(leader);
    if (standby) await killRouter(standby);
  });

  it('reports to the leader, then to the new one after a SIGKILL, keeping its session container', async () => {
    const location = nats.streamLocation('follow');
    ({ leader, standby } = await startLeaderAndStandby(location));
    const dir = tempDir('worker-follows-');
    const catalogue = join(dir, 'catalogue.json');
    writeFileSync(catalogue, JSON.stringify(PLAIN_CATALOGUE));
    const workerId = `w-follow-${process.pid}`;
    // The standby first in the list: the worker must find the leader by the standby's refusal.
    worker = runReadie(
      [
        'worker',
        '--router',
        `${standby.address},${leader.address}`,
        '--listen',
        `127.0.0.1:${await freePort()}`,
        '--id',
        workerId,
        '--flavor',
        'cpu',
        '--memory',
        '8GiB',
        '--state-dir',
        join(dir, 'state'),
        '--catalogue',
        catalogue,
        '--python',
        PYTHON,
        '--restore-backend',
        'template',
        '--insecure',
        '--auth',
        'none',
      ],
      { WORKER_UTILIZATION_INTERVAL: '500ms', LOG_LEVEL: 'info' },
    );
    const pid = worker.process.pid;
    await eventuallyAsync(
      async () =>
        (await statusOf(leader!.address)).workers.some(
          (w) => w.workerId === workerId && w.status === 'ready',
        ),
      'the worker to register with the leader',
      60_000,
    );
    const client = new ReadieClient({ address: [leader.address, standby.address], insecure: true });
    try {
      const session = client.session();
      expect(await session.call({ ...ADD, args: [1] })).to.equal(2);
      const container = session.lastCall?.containerId;
      expect(container).to.be.a('string').and.not.equal('');

      await killRouter(leader);
      const killedAt = Date.now();
      await standby.child.waitFor(/took the lead/, 30_000);
      // The new leader hears from the worker: its reports after the kill.
      await eventuallyAsync(
        async () => {
          const view = (await statusOf(standby!.address)).workers.find(
            (w) => w.workerId === workerId,
          );
          return view?.status === 'ready' && Date.parse(view.lastReportAt) > killedAt;
        },
        'the worker to report to the new leader',
        30_000,
      );
      expect(worker.process.exitCode, 'the worker still runs').to.equal(null);
      expect(worker.process.pid).to.equal(pid);
      expect(await session.call({ ...ADD, args: [2] })).to.equal(3);
      expect(session.lastCall?.containerId, 'the session kept its container').to.equal(container);
      const view = (await statusOf(standby.address)).workers.find((w) => w.workerId === workerId);
      expect(view?.containers.map((c) => c.containerId)).to.include(container);
      const events = await readLog(location);
      const registrations = events.filter(
        (e) => e.type === 'WorkerRegistered' && e.workerId === workerId,
      );
      // Registered once with the first leader; at most re-announced to the new one, never
      // as a restarted worker (a restart would have dropped its containers).
      expect(registrations.length).to.be.within(1, 2);
    } finally {
      client.close();
    }
  });
});
