/**
 * `readie up --log jetstream` as a user runs it: three real nats-server nodes, a leading and a
 * standby router and real workers, all child processes; a call through the printed address list,
 * then the leader SIGKILLed and calls (and a session's state) served by the standby.
 */
import { expect } from 'chai';
import { execSync, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ReadieClient } from '../../src/client/index.js';
import { fold } from '../../src/projections/index.js';
import { freePort, freePortRun } from '../support/e2e-cluster.js';
import { readLog } from '../support/jetstream-routers.js';
import { runReadie } from '../support/processes.js';
import { tempDir } from '../support/temp.js';

const SOURCE = 'def add(x):\n    return x + 1\n';

/** The pids of this state dir's processes whose command line matches `pattern`. */
function pidsOf(stateDir: string, pattern: string): number[] {
  return execSync('ps -eo pid,args')
    .toString()
    .split('\n')
    .filter((line) => line.includes(stateDir) && line.includes(pattern))
    .map((line) => Number(line.trim().split(/\s+/)[0]));
}

/**
 * Every executor process below this state dir's workers, with the worker it runs under and the
 * `--worker-pid` its command line shows (what `ps` tells an operator).
 */
function executorsOf(
  stateDir: string,
): { pid: number; worker: number; shown: number | null; args: string }[] {
  const rows = execSync('ps -eo pid,ppid,args')
    .toString()
    .split('\n')
    .slice(1)
    .map((line) => /^\s*(\d+)\s+(\d+)\s+(.*)$/.exec(line))
    .filter((match) => match !== null)
    .map(([, pid, ppid, args]) => ({ pid: Number(pid), ppid: Number(ppid), args: args! }));
  const parent = new Map(rows.map((row) => [row.pid, row.ppid]));
  const workers = new Set(pidsOf(stateDir, 'bin/readie.js worker'));
  const workerOf = (pid: number): number | undefined => {
    for (let at = parent.get(pid); at !== undefined && at > 1; at = parent.get(at)) {
      if (workers.has(at)) return at;
    }
    return undefined;
  };
  return rows.flatMap((row) => {
    const worker = workerOf(row.pid);
    if (worker === undefined || !row.args.includes('readie_executor')) return [];
    const shown = /--worker-pid (\d+)/.exec(row.args)?.[1];
    return [
      { pid: row.pid, worker, shown: shown === undefined ? null : Number(shown), args: row.args },
    ];
  });
}

/** Rethrows a failed start with the end of each router's and worker's log, so a failure says why. */
function withRouterLogs(stateDir: string): (error: Error) => never {
  return (error) => {
    const tails = ['router-a', 'router-b', 'worker-1', 'worker-2'].map((name) => {
      const file = join(stateDir, 'logs', `${name}.log`);
      const text = existsSync(file) ? readFileSync(file, 'utf8') : '(no log)';
      return `--- ${name}.log (last lines) ---\n${text.split('\n').slice(-15).join('\n')}`;
    });
    throw new Error(`${error.message}\n${tails.join('\n')}`);
  };
}

describe('readie up --log jetstream (real NATS cluster, two routers, real workers)', function () {
  this.timeout(240_000);

  it('serves calls through both addresses, through the standby once the leader is killed, and again after a restart', async () => {
    const stateDir = tempDir('readie-up-js-');
    const port = await freePortRun(4);
    const up = runReadie(
      ['up', '--log', 'jetstream', '--state-dir', stateDir, '--port', String(port)],
      { LEADER_LEASE: '2s', PROBE_INTERVAL: '1s' },
      { detached: true },
    );
    let client: ReadieClient | undefined;
    try {
      await up
        .waitFor(/^readie: Ctrl-C stops the cluster/, 180_000)
        .catch(withRouterLogs(stateDir));
      const cluster = up.lines.find((line) => line.startsWith('readie: local cluster up:'));
      expect(cluster).to.match(
        new RegExp(
          `routers 127\\.0\\.0\\.1:${port} \\(leads\\), 127\\.0\\.0\\.1:${port + 1} \\(stands by\\), log on NATS nats://.*/readie, workers worker-1, worker-2`,
        ),
      );
      const location = /log on NATS (\S+),/.exec(cluster as string)?.[1] as string;
      const exports = Object.fromEntries(
        up.lines
          .filter((line) => line.startsWith('export '))
          .map((line) => /^export ([A-Z_]+)=(.*)$/.exec(line)!.slice(1, 3) as [string, string]),
      );
      expect(exports.READIE_ADDRESS).to.equal(`127.0.0.1:${port},127.0.0.1:${port + 1}`);
      for (const node of [1, 2, 3]) {
        expect(
          existsSync(join(stateDir, 'nats', `node-${node}`, 'store')),
          `node ${node}`,
        ).to.equal(true);
      }
      // The operator's view from the shell the exports were pasted in: which router leads.
      const status = async (): Promise<string> => {
        const child = runReadie(['status', '--state-dir', stateDir], exports);
        expect((await child.exited).code, child.stderr()).to.equal(0);
        return child.lines.join('\n');
      };
      const [first, second] = (exports.READIE_ADDRESS as string).split(',');
      // The standby names the leader once it has read the lease (at most a lease period after
      // it started): until then it says no router leads yet.
      const roles = new RegExp(
        `^Routers\n${first} +leads\n${second} +stands by \\(the leader is ${first}\\)\n`,
      );
      const deadline = Date.now() + 20_000;
      let page = await status();
      while (!roles.test(page) && Date.now() < deadline) page = await status();
      expect(page).to.match(roles);
      client = new ReadieClient({
        env: { ...exports, READIE_INSECURE: '1' },
      });
      expect(await client.call({ module: 'math', function: 'hypot', args: [3, 4] })).to.equal(5);
      const session = client.session();
      expect(await session.call({ source: SOURCE, function: 'add', args: [1] })).to.equal(2);
      const container = session.lastCall?.containerId;
      expect(container, 'the session has a container').to.be.a('string').and.not.equal('');

      const [leader] = pidsOf(stateDir, '--router-id router-a');
      expect(leader, 'the leading router').to.be.a('number');
      process.kill(leader as number, 'SIGKILL');
      const killedAt = Date.now();
      // A call sent on the dead router's connection before the client saw it close may have
      // reached it (ECONNRESET): that one is the caller's. Calls after the close move on.
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(await client.call({ module: 'math', function: 'hypot', args: [6, 8] })).to.equal(10);
      const failover = Date.now() - killedAt;
      // The session's container survived the takeover.
      expect(await session.call({ source: SOURCE, function: 'add', args: [2] })).to.equal(3);
      expect(session.lastCall?.containerId, 'the session kept its container').to.equal(container);
      // The first address is dead now: status and pin go on at the one that leads.
      expect(await status()).to.match(
        new RegExp(
          `^Routers\n${first} +not answering \\(UNAVAILABLE: nothing listens at ${first}.*\n${second} +leads\n`,
        ),
      );
      const pins = runReadie(['pin', 'status', '--state-dir', stateDir], exports);
      expect((await pins.exited).code, pins.stderr()).to.equal(0);
      const events = await readLog(location);
      const starts = events.filter((e) => e.type === 'RouterStarted');
      expect(starts.map((e) => [e.routerId, e.takeoverFrom])).to.deep.include([
        'router-b',
        'router-a',
      ]);
      expect(
        fold(events).sessions.get(session.id)?.pin,
        'the session is still pinned',
      ).to.not.equal(undefined);
      expect(failover, 'ms from the kill to a call served').to.be.below(20_000);
      expect(up.process.exitCode, 'readie up carries on with one router').to.equal(null);
      await up.waitFor(
        /^readie: router-a exited \(signal SIGKILL; see .*router-a\.log\); router-b carries on/,
        10_000,
      );
      const verify = spawnSync(
        process.execPath,
        [join(process.cwd(), 'bin', 'replay.js'), 'verify', location],
        { encoding: 'utf8' },
      );
      expect(verify.status, verify.stdout + verify.stderr).to.equal(0);
      const routerB = readFileSync(join(stateDir, 'logs', 'router-b.log'), 'utf8');
      // It says it won the lease before the takeover's reads and append, then that it leads.
      const won = routerB.indexOf('router won the lease: taking over');
      expect(won, 'router-b says it won the lease').to.be.at.least(0);
      expect(routerB.indexOf('took the lead', won), 'then that it leads').to.be.above(won);

      process.kill(-up.process.pid!, 'SIGINT');
      const { code } = await up.exited;
      expect(code, up.stderr()).to.equal(0);
      expect(up.lines.at(-1)).to.equal('readie: stopped; the event log is flushed.');
      expect(pidsOf(stateDir, 'nats-server'), 'NATS stopped too').to.deep.equal([]);
      expect(pidsOf(stateDir, 'bin/readie.js'), 'nothing left running').to.deep.equal([]);

      // The next run finds its NATS cluster and stream again: the same location, the log goes on.
      const firstRun = events.length;
      client.close();
      // A fresh port: the first run's may have gone to another process's connection meanwhile
      // (`readie up` takes --port and the three after it; a worker's was seen taken once).
      const againPort = await freePortRun(4);
      const again = runReadie(
        ['up', '--log', 'jetstream', '--state-dir', stateDir, '--port', String(againPort)],
        { LEADER_LEASE: '2s', PROBE_INTERVAL: '1s' },
        { detached: true },
      );
      try {
        await again
          .waitFor(/^readie: Ctrl-C stops the cluster/, 180_000)
          .catch(withRouterLogs(stateDir));
        expect(again.lines.join('\n')).to.contain(`log on NATS ${location}`);
        // Every run makes new credentials: the client takes this run's token.
        const token = again.lines.find((line) => line.startsWith('export READIE_AUTH_TOKEN='));
        const address = again.lines.find((line) => line.startsWith('export READIE_ADDRESS='));
        expect(address).to.equal(
          `export READIE_ADDRESS=127.0.0.1:${againPort},127.0.0.1:${againPort + 1}`,
        );
        client = new ReadieClient({
          address: address?.split('=')[1],
          insecure: true,
          token: token?.split('=')[1],
        });
        expect(await client.call({ module: 'math', function: 'hypot', args: [5, 12] })).to.equal(
          13,
        );
        // This run's workers restore (or fork) containers from images the first run's workers
        // built: each executor names the worker it runs under now.
        // A container being restored right now still shows the image's old line until criu has
        // restored it and it has read its spec (seconds on a loaded machine), and the workers
        // restore standbys all the while: each executor seen with the old line must show its own
        // within 30 s (a stale pid that stays is the bug), whatever restores start meanwhile.
        const stale = () =>
          executorsOf(stateDir).filter((executor) => executor.shown !== executor.worker);
        expect(executorsOf(stateDir), 'executors of this run').to.not.be.empty;
        const seen = new Set(stale().map((executor) => executor.pid));
        const stillStale = () => stale().filter((executor) => seen.has(executor.pid));
        const settle = Date.now() + 30_000;
        while (stillStale().length > 0 && Date.now() < settle) {
          await new Promise((resolve) => setTimeout(resolve, 200));
        }
        expect(stillStale().map((executor) => executor.args)).to.deep.equal([]);
        const later = await readLog(location);
        expect(later.length).to.be.above(firstRun);
        expect(later.slice(0, firstRun).map((e) => e.seq)).to.deep.equal(events.map((e) => e.seq));
        process.kill(-again.process.pid!, 'SIGINT');
        expect((await again.exited).code, again.stderr()).to.equal(0);
      } finally {
        if (again.process.exitCode === null) process.kill(-again.process.pid!, 'SIGKILL');
      }
    } finally {
      client?.close();
      if (up.process.exitCode === null) process.kill(-up.process.pid!, 'SIGKILL');
      for (const pid of pidsOf(stateDir, '')) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // Gone already.
        }
      }
    }
  });

  it('refuses to start without nats-server, naming the command that installs it', async () => {
    const stateDir = tempDir('readie-up-js-');
    const up = runReadie([
      'up',
      '--log',
      'jetstream',
      '--nats-server',
      join(stateDir, 'no-nats-server'),
      '--state-dir',
      stateDir,
      '--port',
      String(await freePort()),
    ]);
    const { code } = await up.exited;
    expect(code).to.equal(1);
    expect(up.stderr()).to.contain('nats-server');
    expect(up.stderr()).to.contain('apt-get install -y nats-server');
    expect(existsSync(join(stateDir, 'nats'))).to.equal(false);
    expect(existsSync(join(stateDir, 'logs'))).to.equal(false);
  });

  it('refuses an unknown --log backend', async () => {
    const up = runReadie(['up', '--log', 'etcd', '--state-dir', tempDir('readie-up-js-')]);
    const { code } = await up.exited;
    expect(code).to.equal(1);
    expect(up.stderr()).to.contain('--log etcd: expected lmdb or jetstream');
  });
});
