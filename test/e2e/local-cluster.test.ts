import { expect } from 'chai';
import { execSync, spawnSync } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { credentials, Server, ServerCredentials, status, type ServiceError } from '@grpc/grpc-js';
import { HealthImplementation } from 'grpc-health-check';
import { createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import {
  LocalClusterError,
  startLocalCluster,
  waitForWorkers,
  type LocalCluster,
} from '../../src/cluster/local-cluster.js';
import { ReadieClient } from '../../src/client/index.js';
import { EventLog } from '../../src/events/index.js';
import { AdminServiceClient, type StatusResponse } from '../../src/proto/gen/readie/v1/admin.js';
import {
  Flavor,
  RegistryServiceClient,
  WorkerStatus,
} from '../../src/proto/gen/readie/v1/registry.js';
import { tokenDigest } from '../../src/shared/bearer-token.js';
import { freePort, freePortRun } from '../support/e2e-cluster.js';
import { registered } from '../support/events.js';
import { runReadie } from '../support/processes.js';
import { PYTHON } from '../support/python.js';
import { bearer, eventually, readLog } from '../support/router/harness.js';
import { cleanTempDirs, tempDir } from '../support/temp.js';

const WORKERS = ['worker-1', 'worker-2', 'worker-3'];

/** The mode bits of a path. */
function modeOf(path: string): number {
  return statSync(path).mode & 0o777;
}

/**
 * What `readie up` must have made of its credentials: one fresh token per holder, every file
 * 0600 in 0700 directories, the router's tokens file holding digests only; the printed client
 * token is a tenant's (it may not register a worker), the operator's token reads the status.
 */
async function checkCredentials(stateDir: string, clientToken: string, address: string) {
  const dir = join(stateDir, 'credentials');
  const files = [
    'tokens',
    'router.token',
    'router.sha256',
    'client.token',
    'operator.token',
    ...WORKERS.map((id) => join('workers', `${id}.token`)),
  ];
  expect(modeOf(dir)).to.equal(0o700);
  expect(modeOf(join(dir, 'workers'))).to.equal(0o700);
  for (const file of files) expect(modeOf(join(dir, file)), file).to.equal(0o600);
  const secret = (file: string) => readFileSync(join(dir, file), 'utf8').trim();
  const tokens = files.filter((f) => f !== 'tokens' && f !== 'router.sha256').map(secret);
  expect(new Set(tokens).size, 'every credential is its own').to.equal(tokens.length);
  for (const token of tokens) expect(token).to.match(/^[0-9a-f]{64}$/);
  expect(secret('client.token')).to.equal(clientToken);
  const table = secret('tokens');
  for (const token of tokens) expect(table).to.not.include(token);
  expect(table).to.include(`tenant local ${tokenDigest(clientToken)}`);
  expect(secret('router.sha256')).to.equal(tokenDigest(secret('router.token')));

  const registry = new RegistryServiceClient(address, credentials.createInsecure());
  const refused = await new Promise<ServiceError | null>((resolve) =>
    registry.reportStatus(
      {
        workerId: 'worker-1',
        address: '127.0.0.1:1',
        status: WorkerStatus.WORKER_STATUS_READY,
        error: '',
        flavor: Flavor.FLAVOR_CPU,
        memoryTotal: 0,
        maxContainers: 0,
        gpuMemoryTotal: 0,
        checkpoints: [],
        instanceId: '',
        reportSeq: 0,
        containers: [],
        pythonVersion: '',
        restoreBackend: '',
      },
      bearer(clientToken),
      (error) => resolve(error),
    ),
  );
  registry.close();
  expect(refused?.code, 'a client token registering a worker').to.equal(status.PERMISSION_DENIED);
  const admin = new AdminServiceClient(address, credentials.createInsecure());
  const answer = await new Promise<StatusResponse>((resolve, reject) =>
    admin.status({ includeExpiredSessions: false }, bearer(secret('operator.token')), (e, r) =>
      e ? reject(e) : resolve(r),
    ),
  );
  admin.close();
  expect(answer.workers.map((w) => [w.workerId, w.status])).to.deep.equal(
    WORKERS.map((id) => [id, 'ready']),
  );
  expect(answer.lastSeq).to.be.greaterThan(0);
  // Started with no QUEUE_TIMEOUT in its environment, the router queues (10 min by default).
  expect(answer.queueTimeoutMs).to.equal(600_000);
}

/** A log in `logDir` holding ready registrations of `workerIds`, as a previous run leaves it. */
async function logOfAnEarlierRun(logDir: string, workerIds: readonly string[]): Promise<number> {
  const log = EventLog.open(logDir);
  try {
    await log.append(workerIds.map((id) => registered(id))).committed;
    return log.lastSeq;
  } finally {
    await log.close();
  }
}

/** The error `wait` rejects with; a wait that resolves fails the test. */
function failure(wait: Promise<void>): Promise<Error> {
  return wait.then(
    () => expect.fail('the wait ended as if the workers had registered'),
    (error: Error) => error,
  );
}

/** Runs `body` with a program that accepts connections on loopback and is not a router. */
async function withListener<T>(body: (address: string) => Promise<T>): Promise<T> {
  const server = createServer((socket) => socket.destroy());
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const { port } = server.address() as AddressInfo;
  try {
    return await body(`127.0.0.1:${port}`);
  } finally {
    await new Promise((resolve) => server.close(resolve));
  }
}

/** The service a router reports SERVING once it has recovered from its log. */
const ROUTER_SERVICE = 'readie.v1.RegistryService';

/**
 * Runs `body` beside a stand-in for the router's gRPC server on loopback: its standard health
 * service reports `status` for the router's service until `body` changes it.
 */
async function withRouterStandIn<T>(
  status: 'SERVING' | 'NOT_SERVING',
  body: (address: string, health: HealthImplementation) => Promise<T>,
): Promise<T> {
  const server = new Server();
  const health = new HealthImplementation({ [ROUTER_SERVICE]: status });
  health.addToServer(server);
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (error, bound) =>
      error ? reject(error) : resolve(bound),
    ),
  );
  try {
    return await body(`127.0.0.1:${port}`, health);
  } finally {
    server.forceShutdown();
  }
}

describe('the local cluster (readie up, what npm start runs)', function () {
  this.timeout(180_000);
  afterEach(cleanTempDirs);

  it('starts a router and three workers, prints the environment and an example command that works as printed, and lets the workers leave on a terminal Ctrl-C', async () => {
    const stateDir = tempDir('readie-up-');
    // The state dir of an earlier run that did not stop cleanly: its log already has every worker
    // registered ready, which must not count for this run.
    const earlier = await logOfAnEarlierRun(join(stateDir, 'log'), WORKERS);
    const port = await freePortRun(4);
    const up = runReadie(
      ['up', '--state-dir', stateDir, '--port', String(port), '--workers', '3'],
      {},
      {
        detached: true,
      },
    );
    await up.waitFor(/^readie: Ctrl-C stops the cluster/, 120_000);
    const registeredNow = readLog(join(stateDir, 'log'))
      .filter((e) => e.seq > earlier && e.type === 'WorkerRegistered' && e.status === 'ready')
      .map((e) => (e.type === 'WorkerRegistered' ? e.workerId : ''));
    expect(new Set(registeredNow)).to.deep.equal(new Set(WORKERS));
    expect(up.lines).to.include(
      `readie: local cluster up: router 127.0.0.1:${port}, workers ${WORKERS.join(', ')}`,
    );
    // Each process's pid, as ps knows it: the router and every worker of this run.
    const processes = up.lines.find((line) => line.startsWith('readie: processes: '));
    expect(processes).to.match(
      new RegExp(
        `^readie: processes: router pid \\d+, ${WORKERS.map((id) => `${id} pid \\d+`).join(', ')}$`,
      ),
    );
    for (const [, name, pid] of processes!.matchAll(/(\S+) pid (\d+)/g)) {
      const args = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      expect(args, name).to.include(name === 'router' ? 'router' : 'worker');
      expect(args, name).to.include.members(name === 'router' ? [] : ['--id', name!]);
    }
    const exports = Object.fromEntries(
      up.lines
        .filter((line) => line.startsWith('export '))
        .map((line) => /^export ([A-Z_]+)=(.*)$/.exec(line)!.slice(1, 3) as [string, string]),
    );
    expect(exports).to.have.keys(
      'READIE_ADDRESS',
      'READIE_INSECURE',
      'READIE_AUTH_TOKEN',
      'PYTHONPATH',
    );
    expect(exports.READIE_ADDRESS).to.equal(`127.0.0.1:${port}`);
    await checkCredentials(stateDir, exports.READIE_AUTH_TOKEN!, `127.0.0.1:${port}`);
    const command = up.lines[up.lines.indexOf('# Then run an example:') + 1]!;
    expect(command).to.match(/^\/usr\/bin\/python3 \/.*\/examples\/hello\.py$/);
    // Exactly what a user does: paste the export lines, run the command.
    const shell = `${up.lines.filter((line) => line.startsWith('export ')).join('\n')}\n${command}\n`;
    const example = spawnSync('bash', ['-c', shell], {
      cwd: tempDir(),
      encoding: 'utf8',
      env: { PATH: process.env['PATH'] ?? '' },
      timeout: 120_000,
    });
    expect(example.status, example.stderr).to.equal(0);
    expect(example.stdout).to.contain('add(2, 3) = 5');
    expect(example.stdout).to.contain('a session keeps its Python state: [1, 2, 3]');
    expect(example.stdout).to.contain('remote error: ZeroDivisionError - division by zero');
    // The queue is on by default: with tenant local capped at one slot, the second of two
    // calls waits in the admission queue and runs once the first is done. The operator command
    // is given the state directory alone: it finds the cluster's port and operator token there.
    const quota = runReadie([
      'quota',
      'set',
      '--tenant',
      'local',
      '--max-slots',
      '1',
      '--state-dir',
      stateDir,
    ]);
    expect((await quota.exited).code, quota.stderr()).to.equal(0);
    const beforeQueue = readLog(join(stateDir, 'log')).at(-1)!.seq;
    const script = [
      'import readie',
      '@readie.remote',
      'def nap(x):',
      '    import time',
      '    time.sleep(1)',
      '    return x',
      'calls = [nap.spawn(1), nap.spawn(2)]',
      'print(*[c.get() for c in calls])',
    ].join('\n');
    const queued = spawnSync(PYTHON, ['-c', script], {
      cwd: tempDir(),
      encoding: 'utf8',
      env: { PATH: process.env['PATH'] ?? '', ...exports },
      timeout: 120_000,
    });
    expect(queued.status, queued.stderr).to.equal(0);
    expect(queued.stdout.trim()).to.equal('1 2');
    // A call ends before its events commit: wait for both calls finished on disk.
    await eventually(
      () =>
        readLog(join(stateDir, 'log')).filter(
          (e) => e.seq > beforeQueue && e.type === 'CallFinished',
        ).length >= 2,
      'both calls finished on disk',
    );
    const types = readLog(join(stateDir, 'log'))
      .filter((e) => e.seq > beforeQueue)
      .map((e) => e.type);
    expect(types.filter((type) => type === 'CallQueued')).to.have.length(1);
    expect(types.filter((type) => type === 'CallAdmitted')).to.have.length(1);
    const beforeCtrlC = readLog(join(stateDir, 'log')).at(-1)!.seq;
    // A terminal's Ctrl-C: SIGINT to the whole foreground process group.
    process.kill(-up.process.pid!, 'SIGINT');
    const { code } = await up.exited;
    expect(code, up.stderr()).to.equal(0);
    expect(up.lines.at(-1)).to.equal('readie: stopped; the event log is flushed.');
    // Each worker left (reported REMOVED once, on one signal), none was killed.
    const left = readLog(join(stateDir, 'log'))
      .filter((e) => e.seq > beforeCtrlC && e.type === 'WorkerLeaving')
      .map((e) => (e.type === 'WorkerLeaving' ? e.workerId : ''));
    expect(new Set(left)).to.deep.equal(new Set(WORKERS));
    for (const id of WORKERS) {
      const log = readFileSync(join(stateDir, 'logs', `${id}.log`), 'utf8');
      expect(log).to.contain('"msg":"leaving"');
      expect(log).not.to.contain('second signal');
    }
    // Nothing left running, and the log replays.
    expect(
      execSync(`ps -eo args | grep -c "[b]in/readie.js .*${stateDir}" || true`).toString().trim(),
    ).to.equal('0');
    const verify = spawnSync(
      process.execPath,
      [join(process.cwd(), 'bin', 'replay.js'), 'verify', join(stateDir, 'log')],
      { encoding: 'utf8' },
    );
    expect(verify.status, verify.stdout + verify.stderr).to.equal(0);
    expect(verify.stdout).to.match(/^verified: \d+ recorded decisions reproduced exactly/);
  });

  it('waits for registrations after the start, not those an earlier run left in the log', async () => {
    // One writer for the whole test: LMDB shares an environment within a process.
    const log = EventLog.open(join(tempDir(), 'log'), { pollInterval: 50 });
    try {
      await log.append(registered('worker-1')).committed;
      const earlier = log.lastSeq;
      const never = new Promise<string>(() => undefined);
      await withRouterStandIn('SERVING', async (router) => {
        // The earlier run's registration alone: the wait runs out, whatever the machine's speed.
        const stale = await failure(
          waitForWorkers(log.dir, ['worker-1'], earlier, 1_000, never, [router]),
        );
        expect(stale.message).to.equal('workers worker-1 did not register within 1s');
        await log.append(registered('worker-1')).committed;
        await waitForWorkers(log.dir, ['worker-1'], earlier, 30_000, never, [router]);
      });
    } finally {
      await log.close();
    }
  });

  it('a router that exits before it serves ends the wait with why; one that never serves, with where', async () => {
    const dir = join(tempDir(), 'log');
    const exited = Promise.resolve('the router exited (code 2); see logs/router.log');
    const never = new Promise<string>(() => undefined);
    const nowhere = `127.0.0.1:${await freePort()}`;
    const gone = await failure(waitForWorkers(dir, ['worker-1'], 0, 2_000, exited, [nowhere]));
    expect(gone).to.be.instanceOf(LocalClusterError);
    expect(gone.message).to.equal('the router exited (code 2); see logs/router.log');
    const silent = await failure(waitForWorkers(dir, ['worker-1'], 0, 1_000, never, [nowhere]));
    expect(silent).to.be.instanceOf(LocalClusterError);
    expect(silent.message).to.match(
      new RegExp(`^the router did not serve at ${nowhere} within 1s \\(last: .+\\)$`),
    );
    // It serves, but its log is not there.
    await withRouterStandIn('SERVING', async (router) => {
      const missing = await failure(waitForWorkers(dir, ['worker-1'], 0, 1_000, never, [router]));
      expect(missing).to.be.instanceOf(LocalClusterError);
      expect(missing.message).to.contain(`the router has not written its log at ${dir} within 1s`);
    });
  });

  it('opens the log only once the router serves: never while it creates the log, nor because another program holds its port', async () => {
    const dir = join(tempDir(), 'log');
    const never = new Promise<string>(() => undefined);
    // The log holds the registration while no router serves: a wait that read it would end
    // ready; these run out (their timeout decides, not the machine's speed).
    const log = EventLog.open(dir, { pollInterval: 50 });
    try {
      await log.append(registered('worker-1')).committed;
      // A program that is not a router holds the port: the router is about to exit (its port is
      // taken), perhaps while it creates its log.
      await withListener(async (taken) => {
        const early = await failure(waitForWorkers(dir, ['worker-1'], 0, 1_000, never, [taken]));
        expect(early.message, 'read the log beside a port another program holds').to.match(
          new RegExp(`^the router did not serve at ${taken} within 1s \\(last: .+\\)$`),
        );
      });
      // A router that listens but has not recovered yet.
      await withRouterStandIn('NOT_SERVING', async (router, health) => {
        const early = await failure(waitForWorkers(dir, ['worker-1'], 0, 1_000, never, [router]));
        expect(early.message, 'read the log before the router served').to.equal(
          `the router did not serve at ${router} within 1s (last: it answers NOT_SERVING)`,
        );
        // Routers on a JetStream log: the one started first may stand by; the one that leads
        // serves, and is enough.
        await withRouterStandIn('NOT_SERVING', async (standby) => {
          const both = [standby, router];
          const neither = await failure(waitForWorkers(dir, ['worker-1'], 0, 1_000, never, both));
          expect(neither.message).to.equal(
            `no router served at ${standby} or ${router} within 1s (last: ${standby}: it answers NOT_SERVING; ${router}: it answers NOT_SERVING)`,
          );
          health.setStatus(ROUTER_SERVICE, 'SERVING');
          await waitForWorkers(dir, ['worker-1'], 0, 30_000, never, both);
        });
        await waitForWorkers(dir, ['worker-1'], 0, 30_000, never, [router]);
      });
    } finally {
      await log.close();
    }
  });

  it("a port the router cannot take: readie up exits 1 with the router's own reason, and leaves nothing running", async () => {
    const stateDir = tempDir('readie-up-');
    const port = await freePortRun(2);
    const blocker = createServer();
    await new Promise<void>((resolve) => blocker.listen(port, '127.0.0.1', resolve));
    try {
      const up = runReadie([
        'up',
        '--state-dir',
        stateDir,
        '--port',
        String(port),
        '--workers',
        '1',
      ]);
      const { code } = await up.exited;
      expect(code, up.stderr()).to.equal(1);
      expect(up.stderr()).to.contain(
        `the router exited (code 2): cannot listen on 127.0.0.1:${port}: the address is in use`,
      );
      expect(up.stderr()).to.contain(join(stateDir, 'logs', 'router.log'));
    } finally {
      blocker.close();
    }
    // The worker, starting when the router died, was stopped too (by a signal that may come
    // before it has a handler: its log need not say so).
    expect(
      execSync(`ps -eo args | grep -c "[b]in/readie.js .*${stateDir}" || true`).toString().trim(),
    ).to.equal('0');
  });

  it('refuses to start without a prerequisite, names the command that installs it, and starts nothing', async () => {
    const stateDir = tempDir('readie-up-');
    // A Python without its site packages lacks every Debian package the cluster needs.
    const bare = join(tempDir(), 'python3');
    writeFileSync(bare, `#!/bin/sh\nexec ${PYTHON} -S "$@"\n`, { mode: 0o755 });
    const up = runReadie([
      'up',
      '--state-dir',
      stateDir,
      '--port',
      String(await freePort()),
      '--python',
      bare,
    ]);
    const { code } = await up.exited;
    expect(code).to.equal(1);
    for (const module of ['cloudpickle', 'grpc', 'google.protobuf', 'seccomp']) {
      expect(up.stderr()).to.contain(`Python module ${module} for ${bare}`);
    }
    expect(up.stderr()).to.contain(
      'apt-get update && apt-get install -y python3-cloudpickle python3-grpcio python3-protobuf python3-seccomp',
    );
    expect(up.lines.join('\n')).not.to.contain('starting a router');
    expect(existsSync(join(stateDir, 'log'))).to.equal(false);
    expect(existsSync(join(stateDir, 'logs'))).to.equal(false);
  });

  it("runs two clusters with the same worker IDs side by side: neither disturbs the other, and their state is root's alone", async () => {
    // Outside /tmp (a container's /tmp is its own), under a directory anyone may enter.
    const root = mkdtempSync('/var/tmp/readie-up-');
    chmodSync(root, 0o755);
    const clusters: LocalCluster[] = [];
    const clients: ReadieClient[] = [];
    const start = async (name: string) => {
      const cluster = await startLocalCluster({
        workers: 1,
        stateDir: join(root, name),
        port: await freePort(),
        workerPorts: [await freePort()],
        python: PYTHON,
        numpy: false,
        readyTimeout: 90_000,
      });
      clusters.push(cluster);
      const client = new ReadieClient({
        address: cluster.address,
        insecure: true,
        token: cluster.credentials.clientToken,
        env: {},
      });
      clients.push(client);
      return { cluster, client };
    };
    const bump = {
      source: 'def bump():\n    global n\n    n = globals().get("n", 0) + 1\n    return n\n',
      function: 'bump',
    };
    try {
      const first = await start('first');
      const session = first.client.session();
      expect(await session.call(bump)).to.equal(1);
      const container = session.lastCall!.containerId;
      const second = await start('second');
      expect(second.cluster.workerIds).to.deep.equal(first.cluster.workerIds);
      expect(await second.client.session().call(bump)).to.equal(1);
      expect(await session.call(bump)).to.equal(2);
      await second.cluster.stop();
      expect(await session.call(bump)).to.equal(3);
      expect(session.lastCall!.containerId).to.equal(container);

      // The state: root's alone on the host, and not even visible from a container.
      const state = join(root, 'first');
      const mode = (path: string) => (statSync(path).mode & 0o777).toString(8);
      expect(mode(state)).to.equal('700');
      for (const dir of ['log', 'logs', 'workers', 'workers/worker-1', 'credentials']) {
        expect(mode(join(state, dir)), dir).to.equal('700');
      }
      for (const file of ['catalogue.json', 'logs/router.log', 'logs/worker-1.log']) {
        expect(mode(join(state, file)), file).to.equal('600');
      }
      // The run's credentials: directories 0700 (credentials/, credentials/workers/), files 0600.
      const credentials = readdirSync(join(state, 'credentials'), { recursive: true }) as string[];
      expect(credentials).to.include.members(['tokens', 'client.token', 'workers']);
      for (const entry of credentials) {
        const path = join(state, 'credentials', entry);
        expect(mode(path), entry).to.equal(statSync(path).isDirectory() ? '700' : '600');
      }
      // The log's files 0600; its archive directory (log retention) 0700.
      for (const entry of readdirSync(join(state, 'log'))) {
        const path = join(state, 'log', entry);
        expect(mode(path), entry).to.equal(statSync(path).isDirectory() ? '700' : '600');
      }
      const look = {
        source: [
          'import os',
          'def look(paths):',
          '    out = {}',
          '    for path in paths:',
          '        try:',
          '            out[path] = sorted(os.listdir(path))',
          '        except OSError as error:',
          '            out[path] = error.errno',
          '    return out',
        ].join('\n'),
        function: 'look',
        args: [[root, state, join(state, 'logs'), join(state, 'credentials')]],
      };
      const seen = await first.client.call<Record<string, unknown>>(look);
      expect(seen[root]).to.deep.include.members(['first', 'second']);
      expect(seen[state], 'the state root is masked').to.deep.equal([]);
      expect(seen[join(state, 'logs')]).to.equal(2);
      // The run's tokens (the client's, the operator's, each worker's, the router's) with it.
      expect(seen[join(state, 'credentials')]).to.equal(2);
    } finally {
      for (const client of clients) client.close();
      for (const cluster of clusters) await cluster.stop();
      rmSync(root, { recursive: true, force: true });
    }
  });
});
