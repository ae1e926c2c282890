import { expect } from 'chai';
import { credentials } from '@grpc/grpc-js';
import { fold } from '../../src/projections/index.js';
import { ProxyServiceClient } from '../../src/proto/gen/readie/v1/proxy.js';
import { ContainerState } from '../../src/proto/gen/readie/v1/registry.js';
import {
  codeOf,
  eventually,
  readLog,
  run,
  storyOf,
  type CallOutcome,
} from '../support/router/harness.js';
import { ScriptedWorker } from '../support/router/scripted-worker.js';
import { runReadie, type Child } from '../support/processes.js';
import { cleanTempDirs, tempDir } from '../support/temp.js';

interface RunningRouter {
  readonly child: Child;
  readonly address: string;
  readonly client: ProxyServiceClient;
}

/** Starts `readie router` as a child process on a free port; resolves once it serves. */
async function startChildRouter(logDir: string): Promise<RunningRouter> {
  const child = runReadie(
    [
      'router',
      '--listen',
      '127.0.0.1:0',
      '--log',
      logDir,
      '--insecure',
      '--auth',
      'none',
      '--probe-interval',
      '1h',
    ],
    { REAPER_INTERVAL: '1h', LOG_LEVEL: 'info' },
  );
  const line = await child.waitFor(/"msg":"router serving"/, 60_000);
  const { address } = JSON.parse(line) as { address: string };
  return { child, address, client: new ProxyServiceClient(address, credentials.createInsecure()) };
}

describe('router: a restart after SIGKILL loses nothing', function () {
  this.timeout(180_000);
  afterEach(cleanTempDirs);

  it('keeps its log and sessions, and force-releases the calls that were in flight', async () => {
    const logDir = tempDir();
    const worker = await ScriptedWorker.start({ workerId: 'w1' });
    const first = await startChildRouter(logDir);
    let second: RunningRouter | undefined;
    try {
      await worker.connect(first.address).reportStatus();

      // A session pinned by a finished call: it must survive the crash.
      const pinned = await run(first.client, 'echo', { sessionId: 's-keep', requestId: 'r-pin' });
      expect(codeOf(pinned)).to.equal('OK');
      const containerId = pinned.ids.at(-1)?.containerId as string;
      await worker.reportContainer(containerId, ContainerState.CONTAINER_STATE_READY);

      // Load: calls in flight when the router dies, one of them the first of a new session.
      const inFlight = ['load-0', 'load-1', 'load-2'];
      const doomed: Promise<CallOutcome>[] = inFlight.map((requestId) =>
        run(first.client, 'hang', { requestId }),
      );
      doomed.push(run(first.client, 'hold', { sessionId: 's-new', requestId: 'load-hold' }));
      let stop = false;
      const churn = (async () => {
        let ran = 0;
        while (!stop) {
          await run(first.client, 'echo churn');
          ran += 1;
        }
        return ran;
      })();
      await eventually(
        () => worker.calls.filter((c) => c.header.ids?.requestId?.startsWith('load-')).length === 4,
        'the load to reach the worker',
      );
      // The placements, and the new session's pin, must be on disk before the kill.
      await eventually(() => {
        const events = readLog(logDir);
        const placed = (id: string) => storyOf(events, id).includes('CallPlaced');
        return inFlight.every(placed) && storyOf(events, 'load-hold').includes('SessionPinned');
      }, 'the load to be placed, and s-new pinned, in the log');

      first.child.process.kill('SIGKILL');
      expect((await first.child.exited).signal).to.equal('SIGKILL');
      stop = true;
      expect(await churn, 'calls were running while it died').to.be.greaterThan(0);
      for (const outcome of await Promise.all(doomed))
        expect(codeOf(outcome)).to.equal('UNAVAILABLE');
      await eventually(
        () =>
          worker.calls
            .filter((c) => c.header.ids?.requestId?.startsWith('load-'))
            .every((c) => c.cancelled),
        'the worker calls to end with the router',
      );

      const before = readLog(logDir);
      const lastBefore = before.at(-1)?.seq ?? 0;
      const stateBefore = fold(before);
      for (const requestId of [...inFlight, 'load-hold']) {
        expect(stateBefore.reservations.has(requestId), requestId).to.equal(true);
      }
      expect(stateBefore.sessions.get('s-new')?.pinnedBy).to.equal('load-hold');

      second = await startChildRouter(logDir);
      const router = second;
      worker.connect(router.address);
      expect(await worker.reportUtilization(), 'the worker is known from the log').to.equal(true);

      const after = readLog(logDir);
      expect(after.map((event) => event.seq)).to.deep.equal(after.map((_, i) => i + 1));
      const restart = after.slice(lastBefore);
      expect(restart[0]).to.include({ type: 'RouterStarted', seq: lastBefore + 1 });
      // The settings reached `readie router` by flag (--probe-interval) and environment.
      expect(restart[0]?.type === 'RouterStarted' ? restart[0].config : {}).to.include({
        PROBE_INTERVAL: 3_600_000,
        REAPER_INTERVAL: 3_600_000,
      });
      const released = restart.filter((event) => event.type === 'ReservationExpired');
      // Every call in flight at the crash (the load, and any churn call) is released, once.
      expect(released.map((event) => event.requestId).sort()).to.deep.equal(
        [...stateBefore.reservations.keys()].sort(),
      );
      const unpinned = restart.find((event) => event.type === 'SessionUnpinned');
      expect(unpinned).to.include({ sessionId: 's-new', reason: 'reservation_expired' });
      const state = fold(after);
      expect(state.reservations.size).to.equal(0);
      expect(state.sessions.get('s-keep')?.pin?.containerId).to.equal(containerId);

      // The session still routes to its container.
      const again = await run(router.client, 'echo again', { sessionId: 's-keep' });
      expect(codeOf(again)).to.equal('OK');
      expect(worker.calls.at(-1)?.header.ids?.containerId).to.equal(containerId);
      expect(again.ids.at(-1)?.containerId).to.equal(containerId);
    } finally {
      worker.stop();
      first.client.close();
      first.child.process.kill('SIGKILL');
      if (second) {
        second.client.close();
        second.child.process.kill('SIGTERM');
        expect((await second.child.exited).code).to.equal(0);
      }
    }
  });
});
