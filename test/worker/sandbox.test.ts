import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { status } from '@grpc/grpc-js';
import { ContainerState } from '../../src/proto/gen/readie/v1/registry.js';
import { cleanTempDirs } from '../support/temp.js';
import {
  envelopeOf,
  execute,
  header,
  jsonCall,
  py,
  startHarness,
  type Harness,
} from '../support/worker-harness.js';

const MiB = 1024 * 1024;

describe('sandbox', function () {
  this.timeout(60_000);
  let harness: Harness;
  before(async () => {
    harness = await startHarness();
  });
  after(async () => {
    await harness?.stop();
    cleanTempDirs();
  });

  async function removedReport(containerId: string) {
    await harness.router.waitFor(
      (report) =>
        report.kind === 'container' &&
        report.request.containerId === containerId &&
        report.request.state === ContainerState.CONTAINER_STATE_REMOVED,
    );
  }

  async function stillServes() {
    const result = await execute(
      harness.client,
      header({}),
      jsonCall('def f():\n    return "alive"\n', 'f'),
    );
    expect(envelopeOf(result).value).to.equal('alive');
  }

  it("enforces the call's memory budget: an OOM kill ends the call clearly and the worker carries on", async () => {
    const source = py`
      def hog():
          blocks = []
          for _ in range(64):
              blocks.append(b"x" * (16 * 1024 * 1024))
          return len(blocks)
    `;
    const result = await execute(
      harness.client,
      header({ memory: 128 * MiB, ids: { sessionId: 'sess-oom' } }),
      jsonCall(source, 'hog'),
    );
    // It ran and was killed: RESOURCE_EXHAUSTED, the trailers say so with the budget, never "not started".
    expect(result.code).to.equal(status.RESOURCE_EXHAUSTED);
    expect(result.details).to.include('ran out of memory').and.include('128MiB');
    expect(result.trailers).to.include({
      'readie-killed': 'out-of-memory',
      'readie-memory-budget': String(128 * MiB),
    });
    expect(result.trailers).to.not.have.property('readie-not-started');
    const containerId = result.ids!.containerId;
    await removedReport(containerId);
    const states = harness.router
      .containers()
      .filter((report) => report.containerId === containerId)
      .map((report) => report.state);
    expect(states).to.deep.equal([
      ContainerState.CONTAINER_STATE_BUSY,
      ContainerState.CONTAINER_STATE_ERROR,
      ContainerState.CONTAINER_STATE_REMOVED,
    ]);
    await stillServes();
  });

  it('a memory budget within the limit works (the limit is the budget, not less)', async () => {
    const source = 'def fill():\n    data = b"y" * (64 * 1024 * 1024)\n    return len(data)\n';
    const result = await execute(
      harness.client,
      header({ memory: 256 * MiB }),
      jsonCall(source, 'fill'),
    );
    expect(envelopeOf(result).value).to.equal(64 * MiB);
  });

  it('a segfault in user code ends the call with UNAVAILABLE naming SIGSEGV and destroys the container', async () => {
    const source = 'import ctypes\ndef crash():\n    return ctypes.string_at(0)\n';
    const result = await execute(
      harness.client,
      header({ ids: { sessionId: 'sess-segv' } }),
      jsonCall(source, 'crash'),
    );
    expect(result.code).to.equal(status.UNAVAILABLE);
    expect(result.details).to.include('SIGSEGV');
    await removedReport(result.ids!.containerId);
    const resumed = await execute(
      harness.client,
      header({ ids: { sessionId: 'sess-segv', containerId: result.ids!.containerId } }),
      jsonCall('def f():\n    return 1\n', 'f'),
    );
    expect(resumed.code).to.equal(status.NOT_FOUND);
    await stillServes();
  });

  it('os._exit in user code ends the call with its exit code, never a hung call', async () => {
    const source = 'import os\ndef leave():\n    print("bye", flush=True)\n    os._exit(3)\n';
    const result = await execute(harness.client, header({}), jsonCall(source, 'leave'));
    expect(result.code).to.equal(status.UNAVAILABLE);
    expect(result.details).to.include('exited with code 3');
    // The function ran: no marker that would let a client retry it blindly.
    expect(result.trailers).to.not.have.property('readie-not-started');
    await removedReport(result.ids!.containerId);
    await stillServes();
  });

  it("gives each container a private /tmp: two containers cannot read each other's files", async () => {
    const write = py`
      import os
      def write():
          with open("/tmp/secret.txt", "w") as f:
              f.write("mine")
          return os.listdir("/tmp")
    `;
    const first = await execute(
      harness.client,
      header({ ids: { sessionId: 'sess-tmp-a' } }),
      jsonCall(write, 'write'),
    );
    expect(envelopeOf(first).value).to.include('secret.txt');
    const look = py`
      import os
      def look(other):
          found = []
          for root in ("/tmp", "/", "/var/lib", "/proc"):
              for path, dirs, files in os.walk(root):
                  if path.startswith(("/proc/", "/sys")) or path.count("/") > 6:
                      dirs[:] = []
                      continue
                  if "secret.txt" in files or other in dirs:
                      found.append(path)
          return {"tmp": sorted(os.listdir("/tmp")), "found": found}
    `;
    const second = await execute(
      harness.client,
      header({ ids: { sessionId: 'sess-tmp-b' } }),
      jsonCall(look, 'look', [first.ids!.containerId]),
    );
    expect(second.ids!.containerId).not.to.equal(first.ids!.containerId);
    expect(envelopeOf(second).value).to.deep.equal({ tmp: ['.readie'], found: [] });
  });

  it('gives each container its own process tree, hostname and user from the range, on a read-only base', async () => {
    const source = py`
      import os, socket
      def inspect():
          writable = []
          for path in ("/etc/readie-probe", "/usr/readie-probe", "/var/tmp/readie-probe", "/root/x"):
              try:
                  open(path, "w").close()
                  writable.append(path)
              except OSError:
                  pass
          with open("/dev/null", "w") as null:
              null.write("ok")
          pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
          return {"pids": pids, "uid": os.getuid(), "gid": os.getgid(), "host": socket.gethostname(),
                  "writable": writable, "tmp_ok": os.access("/tmp", os.W_OK),
                  "env_token": "READIE_AUTH_TOKEN" in os.environ, "cwd": os.getcwd()}
    `;
    const result = await execute(harness.client, header({}), jsonCall(source, 'inspect'));
    const value = envelopeOf(result).value as Record<string, unknown>;
    expect(value['pids']).to.deep.equal([1]);
    const { first, count } = harness.worker.options.sandbox.uids;
    expect(value['uid']).to.be.within(first, first + count - 1);
    expect(value).to.deep.include({
      gid: value['uid'],
      host: result.ids!.containerId,
      writable: [],
      tmp_ok: true,
      env_token: false,
      cwd: '/tmp',
    });
  });

  it("puts the container in its own memory and pids cgroups, under the worker's parent", async () => {
    const source = py`
      import os, socket
      def where():
          with open("/tmp/pid", "w") as f:
              f.write(str(os.getpid()))
          return {"localhost": socket.getaddrinfo("localhost", 80)[0][4][0], "uid": os.getuid()}
    `;
    const result = await execute(
      harness.client,
      header({ ids: { sessionId: 'sess-where' } }),
      jsonCall(source, 'where'),
    );
    const value = envelopeOf(result).value as { localhost: string; uid: number };
    expect(value.localhost).to.match(/^(127\.0\.0\.1|::1)$/);
    const container = harness.worker.pool!.list().find((c) => c.id === result.ids!.containerId)!;
    const parent = harness.worker.options.cgroupParent;
    expect(parent).to.match(new RegExp(`^readie/${harness.workerId}-[0-9a-f]{8}$`));
    const memberships = readFileSync(`/proc/${container.process.pid}/cgroup`, 'utf8').split('\n');
    const own = memberships.filter((line) => line.endsWith(`:/${parent}/${container.id}`));
    // cgroup v1: the memory and pids hierarchies; v2: the one unified line.
    const v1 = harness.worker.pool!.list()[0]!.cgroup.version === 1;
    expect(own.map((line) => line.split(':')[1])).to.include.members(
      v1 ? ['memory', 'pids'] : [''],
    );
    expect(container.identity.uid).to.equal(value.uid);
  });
});
