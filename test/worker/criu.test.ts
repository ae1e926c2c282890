import {
  appendFileSync,
  chmodSync,
  existsSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import { status } from '@grpc/grpc-js';
import { pino, type Logger } from 'pino';
import { LogSource } from '../../src/proto/gen/readie/v1/call.js';
import { WorkerStatus } from '../../src/proto/gen/readie/v1/registry.js';
import {
  CriuBackend,
  imageDirName,
  kernelMapsVvarVclock,
  MANIFEST,
} from '../../src/worker/checkpoints/index.js';
import { CATALOGUE } from '../support/catalogues.js';
import {
  criuProbe,
  fakeCriu,
  requireCriu,
  stallingPageServerCriu,
  workerKillingCriu,
} from '../support/criu.js';
import { runReadie } from '../support/processes.js';
import { PYTHON } from '../support/python.js';
import { eventually } from '../support/router/harness.js';
import { cleanTempDirs, tempDir } from '../support/temp.js';
import {
  envelopeOf,
  execute,
  header,
  jsonCall,
  logText,
  py,
  startHarness,
  type Harness,
} from '../support/worker-harness.js';

const DRAW = py`
  import os, random, socket, sys
  def draw():
      imported_before = "numpy" in sys.modules
      import numpy
      return {"numpy_was_imported": imported_before, "random": random.random(),
              "numpy": float(numpy.random.random()), "pid": os.getpid(), "uid": os.getuid(),
              "hostname": socket.gethostname(), "cgroup": open("/proc/self/cgroup").read(),
              "sum": int(numpy.arange(10).sum()),
              "cmdline": open("/proc/self/cmdline", "rb").read().rstrip(b"\\0").decode().split("\\0")}
`;

interface Draw {
  numpy_was_imported: boolean;
  random: number;
  numpy: number;
  pid: number;
  uid: number;
  hostname: string;
  cgroup: string;
  sum: number;
  /** The container's command line, as ps shows it. */
  cmdline: string[];
}

/** The warnings and errors among kept log lines: what an assertion failure should show. */
function troubles(lines: readonly { msg: string; [key: string]: unknown }[]): string {
  return JSON.stringify(lines.filter((line) => Number(line['level']) >= 40));
}

/** A logger that keeps every line, for tests that read the worker's own account. */
function keptLog(): { log: Logger; lines: { msg: string; [key: string]: unknown }[] } {
  const lines: { msg: string; [key: string]: unknown }[] = [];
  const log = pino(
    { level: 'info' },
    { write: (line: string) => lines.push(JSON.parse(line) as (typeof lines)[number]) },
  );
  return { log, lines };
}

function backendOf(harness: Harness): CriuBackend {
  const backend = harness.worker.backend;
  if (!(backend instanceof CriuBackend)) throw new Error(`not criu: ${backend?.description}`);
  return backend;
}

async function draw(harness: Harness, checkpointId = 'ckpt-numpy', sessionId = '') {
  const result = await execute(
    harness.client,
    header({ ids: { checkpointId, sessionId } }),
    jsonCall(DRAW, 'draw'),
  );
  return { result, value: envelopeOf(result).value as Draw };
}

describe('the CRIU restore backend', function () {
  this.timeout(120_000);
  before(async () => {
    await criuProbe();
  });
  after(cleanTempDirs);

  it('probes with a real check, dump and restore of a criu of at least 4.1, and says which it found', async function () {
    await requireCriu(this);
    const probe = await criuProbe();
    if (!probe.ok) throw new Error('unreachable');
    expect(probe.version).to.match(/^\d+\.\d+/);
    const [major, minor] = probe.version.split('.').map(Number) as [number, number];
    expect(major * 100 + minor).to.be.at.least(401);
    expect(['--criu', 'installed prefix', 'PATH']).to.include(probe.foundBy);
  });

  describe('a worker restoring on demand (--standby 0)', () => {
    let harness: Harness;
    before(async function () {
      await requireCriu(this);
      harness = await startHarness({
        flags: { restoreBackend: 'auto', standby: '0', maxContainers: '0' },
        catalogue: CATALOGUE,
      });
    });
    after(async () => {
      await harness?.stop();
    });

    it('asked for auto, uses criu and reports its version, with the checkpoints on disk', async () => {
      const probe = await criuProbe();
      const report = harness.router.statuses()[0]!;
      expect(report.restoreBackend).to.equal(`criu ${probe.ok ? probe.version : '?'}`);
      expect(report.checkpoints).to.deep.equal(['checkpoint_0', 'ckpt-numpy']);
      expect(harness.worker.checkpointTiers()).to.deep.equal([
        { checkpointId: 'checkpoint_0', resident: false, cached: true },
        { checkpointId: 'ckpt-numpy', resident: false, cached: true },
      ]);
    });

    it('answers a call restored by CRIU with the right value, naming its checkpoint in every answer', async () => {
      const { result, value } = await draw(harness);
      expect(value.sum).to.equal(45);
      expect(value.numpy_was_imported, 'numpy came with the checkpoint').to.equal(true);
      expect(result.responses).to.not.be.empty;
      for (const { response } of result.responses) {
        expect(response.ids?.checkpointId).to.equal('ckpt-numpy');
      }
      expect(logText(result, LogSource.LOG_SOURCE_SYSTEM)).to.deep.equal([]);
    });

    it("a restored container is sandboxed as a forked one: pid 1, its own uid, hostname and cgroups, which it sees as its cgroup namespace's root", async () => {
      const { result, value } = await draw(harness);
      const containerId = result.ids!.containerId;
      expect(value.pid).to.equal(1);
      const { first, count } = harness.worker.options.sandbox.uids;
      expect(value.uid).to.be.within(first, first + count - 1);
      expect(value.hostname).to.equal(containerId);
      // From inside, every hierarchy's root is its own cgroup: no worker or container ID in sight.
      const inside = value.cgroup.trim().split('\n');
      expect(inside.map((line) => line.split(':')[2])).to.satisfy((paths: string[]) =>
        paths.every((path) => path === '/'),
      );
    });

    it("charges the restored memory to the container's cgroup", async () => {
      const { result } = await draw(harness, 'ckpt-numpy', 'memory-session');
      const container = harness.worker.pool!.list().find((c) => c.id === result.ids!.containerId)!;
      // The restored pages (numpy imported: well over 10 MiB) were allocated by criu inside it.
      expect(await container.cgroup.usage()).to.be.greaterThan(10 * 1024 * 1024);
    });

    it('keeps session state across calls in a CRIU-restored container', async () => {
      const remember = py`
        import random
        def remember():
            global kept
            kept = random.random()
            return kept
      `;
      const recall = py`
        def recall():
            return kept
      `;
      const first = await execute(
        harness.client,
        header({ ids: { checkpointId: 'ckpt-numpy', sessionId: 'criu-session' } }),
        jsonCall(remember, 'remember'),
      );
      const containerId = first.ids!.containerId;
      expect(first.ids!.checkpointId).to.equal('ckpt-numpy');
      const second = await execute(
        harness.client,
        header({ ids: { sessionId: 'criu-session', containerId } }),
        jsonCall(recall, 'recall'),
      );
      expect(second.ids!.containerId).to.equal(containerId);
      expect(envelopeOf(second).value).to.equal(envelopeOf(first).value);
    });

    it('sibling containers restored from one image draw different random numbers (random and numpy)', async () => {
      const draws = await Promise.all([1, 2, 3].map(async () => (await draw(harness)).value));
      expect(new Set(draws.map((d) => d.random)).size).to.equal(3);
      expect(new Set(draws.map((d) => d.numpy)).size).to.equal(3);
    });

    it('20 containers restored from one image at once all answer', async () => {
      const results = await Promise.all(Array.from({ length: 20 }, () => draw(harness)));
      expect(new Set(results.map(({ result }) => result.ids!.containerId)).size).to.equal(20);
      for (const { result, value } of results) {
        expect(value.sum).to.equal(45);
        expect(result.ids!.checkpointId).to.equal('ckpt-numpy');
      }
    });
  });

  describe('images on disk', () => {
    let stateDir: string;
    let first: Harness | null = null;
    before(async function () {
      await requireCriu(this);
      stateDir = tempDir('rw-criu-restart-');
    });
    after(async () => {
      await first?.stop();
    });

    it('a restarted worker reuses its images instead of dumping them again', async () => {
      const kept = keptLog();
      first = await startHarness({
        stateDir,
        log: kept.log,
        flags: { restoreBackend: 'criu' },
        catalogue: CATALOGUE,
      });
      expect(backendOf(first).dumps, troubles(kept.lines)).to.equal(2);
      await first.stop();
      first = null;
      const { log, lines } = keptLog();
      const again = await startHarness({
        stateDir,
        log,
        flags: { restoreBackend: 'criu' },
        catalogue: CATALOGUE,
      });
      try {
        expect(backendOf(again).dumps, troubles(lines)).to.equal(0);
        expect(
          lines.filter((line) => line.msg === 'checkpoint image reused').map((l) => l.checkpointId),
        ).to.have.members(['checkpoint_0', 'ckpt-numpy']);
        expect(again.router.statuses()[0]!.checkpoints).to.deep.equal([
          'checkpoint_0',
          'ckpt-numpy',
        ]);
        const { result, value } = await draw(again);
        expect(result.ids!.checkpointId).to.equal('ckpt-numpy');
        expect(value.numpy_was_imported).to.equal(true);
        // ps shows the live worker and the images it was restored from, not the dumped seed's
        // command line (the worker that built it, the directory it was built in).
        const flags = value.cmdline.slice(value.cmdline.indexOf('--worker-pid'));
        expect(flags).to.deep.equal([
          '--worker-pid',
          String(process.pid),
          '--checkpoint',
          'ckpt-numpy',
          '--modules',
          'numpy',
          '--restored-from',
          join(stateDir, 'state', 'checkpoints', imageDirName('ckpt-numpy')),
        ]);
      } finally {
        await again.stop();
      }
    });

    it('an image built by another CRIU version or on another CPU model is detected and dumped again', async () => {
      const imagesDir = join(stateDir, 'state', 'checkpoints');
      const edit = (checkpointId: string, change: (identity: Record<string, unknown>) => void) => {
        const dir = join(imagesDir, imageDirName(checkpointId));
        const path = join(dir, MANIFEST);
        chmodSync(dir, 0o700);
        chmodSync(path, 0o600);
        const manifest = JSON.parse(readFileSync(path, 'utf8')) as {
          identity: Record<string, unknown>;
        };
        change(manifest.identity);
        writeFileSync(path, JSON.stringify(manifest));
      };
      edit('checkpoint_0', (identity) => (identity['criuVersion'] = '4.0'));
      edit('ckpt-numpy', (identity) => (identity['cpuModel'] = 'GenuineIntel 6/85 Some Other CPU'));
      const { log, lines } = keptLog();
      const again = await startHarness({
        stateDir,
        log,
        flags: { restoreBackend: 'criu' },
        catalogue: CATALOGUE,
      });
      try {
        expect(backendOf(again).dumps, troubles(lines)).to.equal(2);
        const reasons = lines
          .filter((line) => line.msg === 'checkpoint image not reusable: dumping it again')
          .map((line) => `${String(line.checkpointId)}: ${String(line.reason)}`);
        expect(reasons).to.have.length(2);
        expect(reasons.find((r) => r.startsWith('checkpoint_0'))).to.include(
          'another CRIU version',
        );
        expect(reasons.find((r) => r.startsWith('ckpt-numpy'))).to.include('another CPU model');
        expect((await draw(again)).result.ids!.checkpointId).to.equal('ckpt-numpy');
      } finally {
        await again.stop();
      }
    });

    it('a corrupted image falls back to a cold start with a clear log line, and is dumped again', async () => {
      const { log, lines } = keptLog();
      const harness = await startHarness({
        stateDir,
        log,
        flags: { restoreBackend: 'criu', standby: '0' },
        catalogue: CATALOGUE,
        tuning: { checkpointRebuildDelayMs: 100 },
      });
      try {
        const dir = join(stateDir, 'state', 'checkpoints', imageDirName('ckpt-numpy'));
        const pages = readdirSync(dir).find((name) => name.startsWith('pages-'))!;
        chmodSync(join(dir, pages), 0o600);
        appendFileSync(join(dir, pages), Buffer.alloc(4096, 0xff));
        const statuses = harness.router.statuses().length;
        const { result, value } = await draw(harness);
        expect(value.numpy_was_imported, 'a cold start').to.equal(false);
        for (const { response } of result.responses)
          expect(response.ids?.checkpointId).to.equal('');
        expect(logText(result, LogSource.LOG_SOURCE_SYSTEM).join('\n')).to.match(
          /checkpoint ckpt-numpy was not restored \(checkpoint ckpt-numpy's CRIU image is corrupt \(pages-\d+\.img changed size .*\); it is being dumped again\); the container started cold/,
        );
        const discarded = lines.find(
          (line) =>
            line.msg ===
            'checkpoint image discarded: calls naming it start cold until it is dumped again',
        );
        expect(discarded?.['checkpointId']).to.equal('ckpt-numpy');
        await harness.router.waitFor(() => harness.router.statuses().length > statuses);
        expect(harness.router.statuses()[statuses]!.checkpoints).to.deep.equal(['checkpoint_0']);
        await harness.router.waitFor(
          () => harness.router.statuses().at(-1)!.checkpoints.includes('ckpt-numpy'),
          30_000,
        );
        expect(backendOf(harness).dumps, troubles(lines)).to.equal(1);
        expect((await draw(harness)).result.ids!.checkpointId).to.equal('ckpt-numpy');
      } finally {
        await harness.stop();
      }
    });
  });

  describe('checkpoints built on demand, and their tiers', () => {
    let harness: Harness;
    // While this file exists, the harness's criu kills lazy page servers as soon as it can.
    let stallArm = '';
    before(async function () {
      await requireCriu(this);
      // Made here, not when the file loads: other suites clean the temp dirs made before them.
      stallArm = join(tempDir('rw-stall-'), 'armed');
      const probe = await criuProbe();
      const criu = probe.ok ? stallingPageServerCriu(probe.criu, stallArm) : '';
      harness = await startHarness({
        flags: { restoreBackend: 'criu', criu },
        catalogue: CATALOGUE,
      });
    });
    after(async () => {
      await harness?.stop();
    });

    const WEIGHTS = py`
      def weights():
          import readie_checkpoint
          return int(readie_checkpoint.weights.sum())
    `;

    it('builds a checkpoint with a setup after startup; calls reach what the setup made', async () => {
      const statuses = harness.router.statuses().length;
      await harness.worker.buildCheckpoint({
        id: 'ckpt-weights',
        modules: ['numpy'],
        setup: 'import numpy\nweights = numpy.arange(100)\n',
      });
      await harness.router.waitFor(() => harness.router.statuses().length > statuses);
      expect(harness.router.statuses().at(-1)!.checkpoints).to.include('ckpt-weights');
      const result = await execute(
        harness.client,
        header({ ids: { checkpointId: 'ckpt-weights' } }),
        jsonCall(WEIGHTS, 'weights'),
      );
      expect(envelopeOf(result).value).to.equal(4950);
      expect(result.ids!.checkpointId).to.equal('ckpt-weights');
    });

    it('builds many checkpoints at once, every dump good (dumps on a host take turns)', async () => {
      const ids = Array.from({ length: 12 }, (_, i) => `ckpt-at-once-${i}`);
      const built = await Promise.allSettled(
        ids.map((id) => harness.worker.buildCheckpoint({ id, modules: [] })),
      );
      expect(
        built.flatMap((result) => (result.status === 'rejected' ? [String(result.reason)] : [])),
      ).to.deep.equal([]);
      expect(backendOf(harness).held()).to.include.members(ids);
      const result = await execute(
        harness.client,
        header({ ids: { checkpointId: ids.at(-1)! } }),
        jsonCall('def f():\n    return 1\n', 'f'),
      );
      expect(result.ids!.checkpointId).to.equal(ids.at(-1));
    });

    it('restores a large image lazily, every byte of its memory intact and charged to the container', async () => {
      await harness.worker.buildCheckpoint({
        id: 'ckpt-large',
        modules: ['numpy'],
        setup: 'import numpy\nbig = numpy.arange(10_000_000, dtype=numpy.float64)\n',
      });
      const SUM = py`
        def total():
            import readie_checkpoint
            return float(readie_checkpoint.big.sum())
      `;
      await harness.worker.dropResident('ckpt-large');
      const result = await execute(
        harness.client,
        header({ ids: { checkpointId: 'ckpt-large', sessionId: 'large' }, memory: 1024 ** 3 }),
        jsonCall(SUM, 'total'),
      );
      expect(envelopeOf(result).value).to.equal((10_000_000 * 9_999_999) / 2);
      expect(result.ids!.checkpointId).to.equal('ckpt-large');
      const container = harness.worker.pool!.list().find((c) => c.id === result.ids!.containerId)!;
      expect(
        existsSync(join(container.paths.dir, 'criu-lazy-pages.log')),
        'restored lazily',
      ).to.equal(true);
      expect(await container.cgroup.usage()).to.be.greaterThan(80 * 1024 * 1024);
      await harness.worker.pool!.destroy(container);
    });

    it('a container whose lazy page server dies is killed, never left to compute on zeroed memory', async () => {
      // Still 'ckpt-large' (80 MB of pages), with no standby: the call restores it lazily. The
      // harness's criu kills the page server the moment the restore is done, while it is still
      // copying the container's memory in.
      writeFileSync(stallArm, '');
      const SUM = py`
        def total():
            import readie_checkpoint
            return float(readie_checkpoint.big.sum())
      `;
      try {
        const result = await execute(
          harness.client,
          header({ ids: { checkpointId: 'ckpt-large' }, memory: 1024 ** 3 }),
          jsonCall(SUM, 'total'),
        );
        // The killer writes its line right after its kill, beside the worker that ends the call:
        // on a loaded host the call may come back first.
        const report = `${stallArm}.killed`;
        const lines = () => (existsSync(report) ? readFileSync(report, 'utf8') : '');
        await eventually(() => lines().endsWith('\n'), `the page server's killer to report`);
        const killed = lines().trim().split('\n');
        expect(killed, 'the page server was still serving').to.have.length(1);
        expect(killed[0]).to.match(/^killed \d+$/);
        if (result.code === status.OK) {
          // The killed restore fell back to a cold start, which has no such array: it says so.
          expect(result.ids!.checkpointId).to.equal('');
          expect(logText(result, LogSource.LOG_SOURCE_SYSTEM).join('\n')).to.include(
            'the lazy-pages server of its restore failed',
          );
          expect(envelopeOf(result).ok).to.equal(false);
        } else {
          expect(result.details).to.include('lazy-pages server of its restore failed');
        }
      } finally {
        rmSync(stallArm, { force: true });
      }
    });

    it('a checkpoint whose setup raises is not dumped, and says why', async () => {
      let failure: Error | null = null;
      await harness.worker
        .buildCheckpoint({
          id: 'ckpt-bad-setup',
          modules: [],
          setup: 'raise ValueError("no weights")\n',
        })
        .catch((error: Error) => (failure = error));
      expect(String(failure)).to.include('ValueError: no weights');
      expect(harness.worker.backend!.hasImage('ckpt-bad-setup')).to.equal(false);
    });

    it("drops a checkpoint's resident tier (its standbys) and still restores it from its image", async () => {
      // Standbys fill only slots no call holds: free those the checkpoints built at once filled.
      for (let i = 0; i < 12; i += 1) await harness.worker.dropResident(`ckpt-at-once-${i}`);
      harness.worker.pool!.refreshStandbys();
      await harness.worker.pool!.settled();
      expect(harness.worker.pool!.standbysOf('ckpt-weights')).to.be.greaterThan(0);
      const tiers = () =>
        harness.worker.checkpointTiers().find((tier) => tier.checkpointId === 'ckpt-weights');
      expect(tiers()).to.deep.equal({ checkpointId: 'ckpt-weights', resident: true, cached: true });
      const memoryBefore = await harness.worker.pool!.memoryUsed();
      await harness.worker.dropResident('ckpt-weights');
      await harness.worker.pool!.settled();
      expect(tiers()).to.deep.equal({
        checkpointId: 'ckpt-weights',
        resident: false,
        cached: true,
      });
      expect(await harness.worker.backend!.residentBytes('ckpt-weights')).to.equal(0);
      expect(await harness.worker.pool!.memoryUsed()).to.be.lessThan(memoryBefore);
      const result = await execute(
        harness.client,
        header({ ids: { checkpointId: 'ckpt-weights' } }),
        jsonCall(WEIGHTS, 'weights'),
      );
      expect(envelopeOf(result).value).to.equal(4950);
      expect(result.ids!.checkpointId).to.equal('ckpt-weights');
      await harness.worker.pool!.settled();
      expect(tiers()!.resident, 'no standby restocked').to.equal(false);
    });
  });

  describe('a worker killed while criu restores', () => {
    /** Whether process `pid` still runs (a zombie does not). */
    const running = (pid: number) => {
      try {
        const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
        return !stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
      } catch {
        return false;
      }
    };

    it("leaves nothing of the restore behind: the restorer kills what criu left in the container's cgroups", async function () {
      await requireCriu(this);
      const probe = await criuProbe();
      if (!probe.ok) throw new Error('unreachable');
      // The worker's startup probe restores a container: the armed criu kills the worker there.
      const arm = join(tempDir('rw-kill-arm-'), 'armed');
      writeFileSync(arm, '');
      const worker = runReadie([
        'worker',
        '--router',
        '127.0.0.1:1',
        '--listen',
        '127.0.0.1:0',
        '--id',
        'killed-mid-restore',
        '--state-dir',
        join(tempDir('rw-kill-'), 'state'),
        '--python',
        PYTHON,
        '--insecure',
        '--auth',
        'none',
        '--restore-backend',
        'criu',
        '--criu',
        workerKillingCriu(probe.criu, arm),
        '--memory',
        '2GiB',
        '--flavor',
        'cpu',
      ]);
      const timer = setTimeout(() => worker.process.kill('SIGKILL'), 60_000);
      const ended = await worker.exited.finally(() => clearTimeout(timer));
      expect(existsSync(`${arm}.restoring`), `no restore was stopped: ${worker.stderr()}`).to.equal(
        true,
      );
      expect(ended.signal).to.equal('SIGKILL');
      const task = Number(readFileSync(`${arm}.restoring`, 'utf8').trim());
      try {
        await eventually(
          () => !running(task),
          `the task criu was restoring (${task}) gone`,
          10_000,
        );
      } finally {
        if (running(task)) process.kill(task, 'SIGKILL');
      }
    });
  });

  describe('a criu that cannot work here', () => {
    it('refuses a criu older than 4.1 with the reason and the command that installs one (--restore-backend criu: ERROR)', async () => {
      const old = fakeCriu('3.17.1');
      const vvarVclock = await kernelMapsVvarVclock();
      const harness = await startHarness({
        flags: { restoreBackend: 'criu', criu: old },
        catalogue: CATALOGUE,
      });
      try {
        const [report] = harness.router.statuses();
        expect(report!.status).to.equal(WorkerStatus.WORKER_STATUS_ERROR);
        expect(report!.error).to.include(
          `--restore-backend criu, but criu is unusable here: criu 3.17.1`,
        );
        if (vvarVclock) {
          expect(report!.error).to.include(`criu 3.17.1 (${old}) is older than 4.1`);
          expect(report!.error).to.include('[vvar_vclock]');
          expect(report!.error).to.match(
            /install a working one with sudo \/\S+\/deploy\/install-criu\.sh/,
          );
        } else {
          expect(report!.error).to.include('check failed: this stand-in criu');
        }
        const result = await execute(harness.client, header({}), jsonCall(DRAW, 'draw'));
        expect(result.code).to.equal(status.UNAVAILABLE);
      } finally {
        await harness.stop();
      }
    });

    it('with auto, falls back to the template backend and reports why', async () => {
      const harness = await startHarness({
        flags: { restoreBackend: 'auto', criu: fakeCriu('3.17.1') },
        catalogue: CATALOGUE,
      });
      try {
        const report = harness.router.statuses()[0]!;
        expect(report.status).to.equal(WorkerStatus.WORKER_STATUS_READY);
        expect(report.restoreBackend).to.match(/^template \(criu unusable: criu 3\.17\.1 /);
        expect(report.checkpoints).to.include('ckpt-numpy');
      } finally {
        await harness.stop();
      }
    });

    it('names a --criu that does not exist', async () => {
      const missing = join(tempDir('rw-no-criu-'), 'criu');
      const harness = await startHarness({
        flags: { restoreBackend: 'auto', criu: missing },
        catalogue: CATALOGUE,
      });
      try {
        expect(harness.router.statuses()[0]!.restoreBackend).to.equal(
          `template (criu unusable: --criu ${missing} is not an executable file)`,
        );
      } finally {
        await harness.stop();
      }
    });
  });
});
