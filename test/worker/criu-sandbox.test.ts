/**
 * The tenant boundary of a CRIU-restored container, tried as a hostile tenant would: the same
 * attacks as the forked containers' (isolation.test.ts, limits.test.ts, network.test.ts), made
 * from inside containers that `criu restore` brought back from a dumped seed. A restored process
 * was dumped before it entered any sandbox; everything below holds only because each restore
 * goes through the one sandbox entry a fork uses.
 */
import { expect } from 'chai';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CriuBackend } from '../../src/worker/checkpoints/index.js';
import { CATALOGUE } from '../support/catalogues.js';
import { requireCriu } from '../support/criu.js';
import { cleanTempDirs } from '../support/temp.js';
import {
  envelopeOf,
  execute,
  header,
  jsonCall,
  py,
  startHarness,
  type CallResult,
  type Harness,
} from '../support/worker-harness.js';

const CHECKPOINT = 'ckpt-numpy';
const PIDS_LIMIT = 48;
const MiB = 1024 * 1024;

/** Tries TCP connections from inside the container; says what each one got. */
const CONNECT = py`
  import os, socket
  def connect(targets):
      out = {"uid": os.getuid(), "gid": os.getgid()}
      for host, port in targets:
          s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
          s.settimeout(3)
          try:
              s.connect((host, port))
              out[f"{host}:{port}"] = "connected"
          except OSError as error:
              out[f"{host}:{port}"] = error.__class__.__name__ + ":" + str(error.errno)
          finally:
              s.close()
      return out
`;

/** Runs `source`'s `name` on a container restored from the numpy checkpoint; checks it was. */
async function restored(
  harness: Harness,
  source: string,
  name: string,
  args: unknown[] = [],
  options: { sessionId?: string; memory?: number } = {},
): Promise<{ result: CallResult; value: Record<string, unknown> }> {
  const result = await execute(
    harness.client,
    header({
      ids: { checkpointId: CHECKPOINT, sessionId: options.sessionId ?? '' },
      ...(options.memory ? { memory: options.memory } : {}),
    }),
    jsonCall(source, name, args),
  );
  expect(result.ids?.checkpointId, 'restored from the checkpoint, not started cold').to.equal(
    CHECKPOINT,
  );
  return { result, value: envelopeOf(result).value as Record<string, unknown> };
}

describe('a CRIU-restored container, attacked from inside', function () {
  this.timeout(120_000);
  after(cleanTempDirs);

  describe('--network none (the default), restored on demand', () => {
    let harness: Harness;
    let stateRoot: string;
    let hidden: string;
    before(async function () {
      await requireCriu(this);
      // State outside /tmp, and a directory anyone could read: only the mask keeps them out.
      stateRoot = mkdtempSync('/var/tmp/rw-criu-sandbox-');
      chmodSync(stateRoot, 0o755);
      hidden = join(stateRoot, 'cluster-root');
      mkdirSync(hidden, { mode: 0o755 });
      writeFileSync(join(hidden, 'router.log'), 'sess-secret', { mode: 0o644 });
      harness = await startHarness({
        catalogue: CATALOGUE,
        flags: {
          restoreBackend: 'criu',
          standby: '0',
          maxContainers: '0',
          pidsLimit: String(PIDS_LIMIT),
          stateDir: join(stateRoot, 'worker'),
          hide: hidden,
        },
      });
      expect(harness.worker.backend).to.be.instanceOf(CriuBackend);
    });
    after(async () => {
      await harness?.stop();
      if (stateRoot) rmSync(stateRoot, { recursive: true, force: true });
    });

    it("cannot reach the worker's or the router's port, and runs as its own uid, not its sibling's", async () => {
      const routerPort = Number(harness.router.address.split(':').at(-1));
      const targets: [string, number][] = [
        ['127.0.0.1', harness.worker.port],
        ['127.0.0.1', routerPort],
      ];
      const held = await restored(harness, CONNECT, 'connect', [targets], {
        sessionId: 'sess-criu-a',
      });
      const sibling = await restored(harness, CONNECT, 'connect', [[]], {
        sessionId: 'sess-criu-b',
      });
      for (const [host, port] of targets) {
        // Its own loopback refuses: nothing of the host's listens in its network namespace.
        expect(held.value[`${host}:${port}`], `${host}:${port}`).to.match(
          /^(ConnectionRefusedError:111|OSError:101)$/,
        );
      }
      const { first, count } = harness.worker.options.sandbox.uids;
      const uid = held.value['uid'] as number;
      expect(uid).to.be.within(first, first + count - 1);
      expect(held.value['gid']).to.equal(uid);
      expect(sibling.value['uid']).not.to.equal(uid);
      // The host's view of the same process: the uid the worker claimed for it, in its own
      // network namespace, in its own memory (and, on v1, pids) cgroup under the worker's parent.
      const container = harness.worker
        .pool!.list()
        .find((c) => c.id === held.result.ids!.containerId)!;
      expect(container.identity.uid).to.equal(uid);
      const status = readFileSync(`/proc/${container.process.pid}/status`, 'utf8');
      expect(status).to.match(new RegExp(`\\nUid:\\s+${uid}\\s+${uid}\\s+${uid}\\s+${uid}\\n`));
      expect(readFileSync(`/proc/${container.process.pid}/net/dev`, 'utf8')).not.to.match(
        /^\s*(eth|en|wl)/m,
      );
      const parent = harness.worker.options.cgroupParent;
      const own = readFileSync(`/proc/${container.process.pid}/cgroup`, 'utf8')
        .split('\n')
        .filter((line) => line.endsWith(`:/${parent}/${container.id}`))
        .map((line) => line.split(':')[1]);
      expect(own).to.include.members(container.cgroup.version === 1 ? ['memory', 'pids'] : ['']);
    });

    it('cannot list container IDs or read the state directories the worker knows of', async () => {
      const source = py`
        import os
        def look(paths):
            out = {}
            for path in paths:
                try:
                    out[path] = sorted(os.listdir(path))
                except OSError as error:
                    out[path] = error.errno
            with open("/proc/self/cgroup") as f:
                out["cgroup"] = sorted(set(line.split(":", 2)[2].strip() for line in f))
            return out
      `;
      const stateDir = harness.worker.options.stateDir;
      const paths = [stateDir, join(stateDir, 'checkpoints'), hidden, '/sys/fs/cgroup'];
      const { value } = await restored(harness, source, 'look', [paths]);
      expect(value[stateDir]).to.deep.equal([]);
      // The CRIU images (the dumped seed's memory) live there too, and are out of reach.
      expect(value[join(stateDir, 'checkpoints')]).to.equal(2);
      expect(value[hidden]).to.deep.equal([]);
      expect(value['/sys/fs/cgroup']).to.deep.equal([]);
      expect(value['cgroup']).to.deep.equal(['/']);
    });

    it("cannot open another restored container's pty or its keyrings", async () => {
      const hold = py`
        import os
        ptys = []
        def hold():
            leader, follower = os.openpty()
            ptys.append((leader, follower))
            return {"pty": os.ttyname(follower)}
      `;
      const holder = await restored(harness, hold, 'hold', [], { sessionId: 'sess-criu-pty' });
      const probe = py`
        import ctypes, os, seccomp
        libc = ctypes.CDLL(None, use_errno=True)
        def probe(pty):
            out = {"pts": sorted(os.listdir("/dev/pts"))}
            try:
                os.close(os.open(pty, os.O_RDWR | os.O_NOCTTY))
                out["open"] = "opened"
            except OSError as error:
                out["open"] = error.errno
            ctypes.set_errno(0)
            keyctl = seccomp.resolve_syscall(seccomp.Arch.NATIVE, "keyctl")
            out["keyctl"] = (libc.syscall(keyctl, 0, -4, 0), ctypes.get_errno())
            return out
      `;
      const { value } = await restored(harness, probe, 'probe', [holder.value['pty']]);
      expect(value['pts']).to.deep.equal(['ptmx']);
      expect(value['open']).to.equal(2);
      expect(value['keyctl']).to.deep.equal([-1, 1]);
    });

    it('cannot create a user namespace, mount, ptrace or load kernel modules (seccomp: EPERM)', async () => {
      const source = py`
        import ctypes, seccomp
        libc = ctypes.CDLL(None, use_errno=True)
        def escape():
            out = {}
            def errno_of(result):
                return ctypes.get_errno() if result != 0 else 0
            ctypes.set_errno(0)
            out["unshare_user"] = errno_of(libc.unshare(0x10000000))
            ctypes.set_errno(0)
            out["mount"] = errno_of(libc.mount(b"none", b"/tmp", b"tmpfs", 0, None))
            ctypes.set_errno(0)
            out["ptrace"] = errno_of(libc.ptrace(16, 1, None, None))
            ctypes.set_errno(0)
            init_module = seccomp.resolve_syscall(seccomp.Arch.NATIVE, "init_module")
            out["init_module"] = errno_of(libc.syscall(init_module, None, 0, b""))
            with open("/proc/self/status") as status:
                out["seccomp"] = [line.split()[1] for line in status if line.startswith("Seccomp:")][0]
            return out
      `;
      const { value } = await restored(harness, source, 'escape');
      expect(value).to.deep.equal({
        unshare_user: 1,
        mount: 1,
        ptrace: 1,
        init_module: 1,
        seccomp: '2', // SECCOMP_MODE_FILTER
      });
    });

    it('cannot start more tasks than its pids limit, nor write more to /tmp than its quota', async () => {
      const exhaust = py`
        import os, threading
        def exhaust():
            stop = threading.Event()
            started, written, error = 0, 0, None
            try:
                for _ in range(2000):
                    threading.Thread(target=stop.wait, daemon=True).start()
                    started += 1
            except RuntimeError:
                pass
            stop.set()
            stat = os.statvfs("/tmp")
            try:
                with open("/tmp/fill", "wb") as out:
                    for _ in range(1024):
                        out.write(b"z" * MiB)
                        out.flush()
                        written += MiB
            except OSError as failure:
                error = failure.errno
            os.unlink("/tmp/fill")
            return {"started": started, "size": stat.f_blocks * stat.f_frsize,
                    "written": written, "error": error}
        MiB = 1024 * 1024
      `;
      const { value } = await restored(harness, exhaust, 'exhaust', [], { memory: 256 * MiB });
      expect(value['started']).to.be.within(PIDS_LIMIT - 10, PIDS_LIMIT - 1);
      expect(value['size']).to.equal(128 * MiB);
      expect(value['error']).to.equal(28); // ENOSPC
      expect(value['written']).to.be.within(120 * MiB, 128 * MiB);
      // The worker carries on: the next restore answers.
      expect((await restored(harness, CONNECT, 'connect', [[]])).value['uid']).to.be.a('number');
    });
  });

  describe('--network egress, restored ahead of demand (a standby)', () => {
    let harness: Harness;
    before(async function () {
      await requireCriu(this);
      harness = await startHarness({
        catalogue: CATALOGUE,
        flags: { restoreBackend: 'criu', standby: '1', maxContainers: '0', network: 'egress' },
      });
      expect(harness.worker.backend).to.be.instanceOf(CriuBackend);
    });
    after(async () => {
      await harness?.stop();
    });

    it("gets its own slirp4netns: names resolve, and the host's loopback (the worker) stays out of reach", async () => {
      const source = py`
        import os, socket, struct
        def probe(worker_port):
            with open("/etc/resolv.conf") as conf:
                servers = [line.split()[1] for line in conf if line.startswith("nameserver")]
            query = struct.pack(">HHHHHH", 0x5eed, 0x0100, 1, 0, 0, 0) + b"\\x07example\\x03com\\x00\\x00\\x01\\x00\\x01"
            out = {"servers": servers, "interfaces": sorted(name for _, name in socket.if_nameindex())}
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.settimeout(5)
            try:
                s.sendto(query, (servers[0], 53))
                out["answered"] = s.recv(512)[:2] == b"\\x5e\\xed"
            except OSError as error:
                out["answered"] = str(error)
            for host in ("127.0.0.1", "10.0.2.2"):
                c = socket.socket()
                c.settimeout(3)
                try:
                    c.connect((host, worker_port))
                    out[host] = "connected"
                except OSError as error:
                    out[host] = error.errno
                finally:
                    c.close()
            return out
      `;
      await harness.worker.pool!.settled();
      const { value } = await restored(harness, source, 'probe', [harness.worker.port]);
      expect(value['servers']).to.deep.equal(['10.0.2.3']);
      expect(value['interfaces']).to.include('tap0');
      expect(value['answered'], JSON.stringify(value)).to.equal(true);
      expect(value['127.0.0.1']).to.equal(111);
      // slirp4netns --disable-host-loopback: its gateway address leads nowhere.
      expect(value['10.0.2.2']).to.be.oneOf([101, 111]);
    });
  });
});
