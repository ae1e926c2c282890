import { expect } from 'chai';
import { status } from '@grpc/grpc-js';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { LogSource } from '../../src/proto/gen/readie/v1/call.js';
import { tenantTag } from '../../src/worker/core/images/index.js';
import { requireCriu } from '../support/criu.js';
import { buildWheel } from '../support/python.js';
import { cleanTempDirs, tempDir } from '../support/temp.js';
import {
  envelopeOf,
  execute,
  header,
  jsonCall,
  logText,
  py,
  startHarness,
  type CallResult,
  type Harness,
} from '../support/worker-harness.js';

// What the module did at import (a token drawn then) and what the container running the call is.
const LOOK = py`
  def look():
      import os, readie_snappkg
      status = dict(line.split(":\\t", 1) for line in open("/proc/self/status").read().splitlines() if ":\\t" in line)
      return {
          "token": readie_snappkg.TOKEN,
          "uid": os.getuid(),
          "pid": os.getpid(),
          "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
          "seccomp": status["Seccomp"].strip(),
          "noNewPrivs": status["NoNewPrivs"].strip(),
          "mode": os.environ.get("MODE"),
          "container": os.environ.get("READIE_CONTAINER_ID"),
          "file": readie_snappkg.__file__,
          "attacks": attacks(),
      }

  def attacks():
      import os, signal
      refused = []
      for name, attempt in (
          ("kill init", lambda: os.kill(1, signal.SIGKILL)),
          ("read init's memory", lambda: open("/proc/1/mem", "rb").read(1)),
          ("write the base filesystem", lambda: open("/usr/readie-was-here", "w")),
          ("write the image's prefix", lambda: open("/tmp/.readie/image/readie-was-here", "w")),
      ):
          try:
              attempt()
          except OSError as error:
              refused.append(f"{name}: {type(error).__name__}")
      return refused
`;

const IMAGE = {
  packages: ['readie_snappkg==1.0'],
  imports: ['readie_snappkg'],
  env: { MODE: 'prod' },
};

interface Look {
  token: number;
  uid: number;
  pid: number;
  pids: number[];
  seccomp: string;
  noNewPrivs: string;
  mode: string;
  container: string;
  file: string;
  attacks: string[];
}

async function look(
  harness: Harness,
  tenantId: string,
): Promise<{ look: Look; result: CallResult }> {
  const result = await execute(
    harness.client,
    header({ image: IMAGE, tenantId }),
    jsonCall(LOOK, 'look'),
  );
  expect(
    result.code,
    `${result.details} ${JSON.stringify(envelopeOf(result).error ?? '')}`,
  ).to.equal(status.OK);
  return { look: envelopeOf(result).value as Look, result };
}

function system(result: CallResult): string {
  return logText(result, LogSource.LOG_SOURCE_SYSTEM).join('\n');
}

describe('image snapshots (CRIU): an image entered once, inside its sandbox, then restored', function () {
  this.timeout(180_000);
  let wheels: string;
  let stateDir: string;

  /** The directory of `tenant`'s image whose manifest imports `module` (one per tenant and module). */
  function imageDirOf(tenant: string, module: string): string {
    const tenantDir = join(stateDir, 'state', 'images', tenantTag(tenant));
    const found = readdirSync(tenantDir).filter((id) =>
      readFileSync(join(tenantDir, id, 'manifest.json'), 'utf8').includes(`"${module}"`),
    );
    expect(found).to.have.length(1);
    return join(tenantDir, found[0]!);
  }

  let harness: Harness | null = null;
  const start = () =>
    startHarness({
      stateDir,
      flags: { wheelDir: wheels, restoreBackend: 'criu', standby: '0' },
    });

  before(async function () {
    await requireCriu(this);
    const wheelDir = tempDir('rw-snap-wheels-');
    wheels = buildWheel(wheelDir, 'readie_snappkg', 'import random\nTOKEN = random.random()\n');
    // At import, leaves a process outside its own process tree (its parent exits: the orphan
    // goes to the container's pid 1). One sharing the seed's memory could rewrite what criu reads
    // from the seed while it dumps (its credentials, for one).
    buildWheel(
      wheelDir,
      'readie_orphanpkg',
      'import os, time\nchild = os.fork()\nif child == 0:\n    if os.fork() == 0:\n        time.sleep(600)\n    os._exit(0)\nos.waitpid(child, 0)\n',
    );
    stateDir = tempDir('rw-snap-');
    harness = await start();
  });
  after(async () => {
    await harness?.stop();
    cleanTempDirs();
  });

  let first: Look;
  it('builds the image, snapshots it after its imports, and restores every container from that one import', async () => {
    const built = await look(harness!, 'tenant-a');
    expect(system(built.result)).to.match(/image: snapshotted after its imports \(\d+ bytes/);
    first = built.look;
    const again = await look(harness!, 'tenant-a');
    const third = await look(harness!, 'tenant-a');
    for (const later of [built.look, again.look, third.look]) {
      // The module was imported once, in the seed: every container has its token.
      expect(later.token).to.equal(first.token);
      expect(later.mode).to.equal('prod');
      expect(later.file).to.match(/^\/tmp\/\.readie\/image\//);
    }
    expect(again.look.container).to.not.equal(third.look.container);
    expect(again.result.responses.at(-1)?.response.ids?.checkpointId).to.match(
      /^image:[0-9a-f]{16}$/,
    );
  });

  it('keeps the restored process in its sandbox: the image uid, seccomp, no new privileges, its own pids', async () => {
    const { look: inside } = await look(harness!, 'tenant-a');
    expect(inside.uid).to.equal(first.uid);
    expect(inside.uid).to.be.greaterThan(0);
    expect(inside.seccomp).to.equal('2');
    expect(inside.noNewPrivs).to.equal('1');
    // Pid 1 is the container's init (root, outside reach), the executor is pid 2; nothing else.
    expect(inside.pid).to.equal(2);
    expect(inside.pids).to.deep.equal([1, 2]);
    expect(inside.attacks).to.deep.equal([
      'kill init: PermissionError',
      "read init's memory: PermissionError",
      'write the base filesystem: OSError',
      "write the image's prefix: OSError",
    ]);
  });

  it("never lends a tenant's snapshot to another: tenant B's same declaration gets its own import and uid", async () => {
    const { look: other, result } = await look(harness!, 'tenant-b');
    expect(system(result)).to.match(/image: snapshotted/);
    expect(other.token).to.not.equal(first.token);
    expect(other.uid).to.not.equal(first.uid);
  });

  it('refuses to snapshot a seed that ran a process outside its tree; its containers import the image instead', async () => {
    const image = { packages: ['readie_orphanpkg==1.0'], imports: ['readie_orphanpkg'], env: {} };
    const call = jsonCall(
      py`
      def who():
          import os
          return [os.getuid(), os.getpid()]
    `,
      'who',
    );
    const first = await execute(harness!.client, header({ image, tenantId: 'tenant-a' }), call);
    expect(first.code, first.details).to.equal(status.OK);
    expect(system(first)).to.match(
      /image: no snapshot \(the image's seed ran processes outside its process tree while it was dumped \(pids \[\d+\]\)/,
    );
    const second = await execute(harness!.client, header({ image, tenantId: 'tenant-a' }), call);
    const [uid, pid] = envelopeOf(second).value as [number, number];
    // A container of its own (its own uid, its executor pid 1), which entered the image.
    expect(uid).to.be.greaterThan(0);
    expect(pid).to.equal(1);
    expect(
      harness!.worker.images!.list().find((held) => held.manifest.imports[0] === 'readie_orphanpkg')
        ?.snapshot,
    ).to.equal(null);
  });

  it('a restarted worker reopens the snapshot (the same import), removes a half-written one, and dumps again one that changed', async () => {
    await harness!.stop();
    harness = null;
    // What a worker killed mid-dump leaves beside a whole snapshot: a directory with no manifest.
    const imageDir = imageDirOf('tenant-a', 'readie_snappkg');
    const half = join(imageDir, 'snapshot-0badd0e5');
    mkdirSync(half);
    writeFileSync(join(half, 'pages-1.img'), 'the dump was killed here');
    harness = await start();
    const { look: reopened } = await look(harness, 'tenant-a');
    expect(reopened.token).to.equal(first.token);
    expect(reopened.uid).to.equal(first.uid);
    expect(existsSync(half)).to.equal(false);
    expect(readdirSync(imageDir).filter((name) => name.startsWith('snapshot-'))).to.have.length(1);

    // Tamper with tenant B's snapshot on disk: the running worker stops restoring it (its
    // containers import the image instead), and the next start dumps it again.
    const { look: dumped } = await look(harness, 'tenant-b');
    const tenantB = imageDirOf('tenant-b', 'readie_snappkg');
    const [snapshotName] = readdirSync(tenantB).filter((name) => name.startsWith('snapshot-'));
    const snapshot = join(tenantB, snapshotName!);
    const pages = readdirSync(snapshot).find((name) => name.startsWith('pages-'))!;
    chmodSync(join(snapshot, pages), 0o600);
    writeFileSync(join(snapshot, pages), 'not the pages that were dumped');
    const imported = await look(harness, 'tenant-b');
    expect(imported.look.token).to.not.equal(dumped.token);
    await harness.stop();
    harness = null;
    harness = await start();
    // Calls that come before the snapshot is dumped again import the image; later ones share it.
    let previous = (await look(harness, 'tenant-b')).look.token;
    let shared: number | null = null;
    // Bounded by time, not by calls: under load the dump takes longer, and calls come faster.
    const deadline = Date.now() + 60_000;
    while (shared === null && Date.now() < deadline) {
      const token = (await look(harness, 'tenant-b')).look.token;
      if (token === previous) shared = token;
      previous = token;
    }
    expect(shared, 'no two containers shared one import after the restart').to.not.equal(null);
    expect(shared).to.not.equal(dumped.token);
  });
});
