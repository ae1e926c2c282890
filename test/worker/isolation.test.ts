/**
 * The tenant boundary, tried as a hostile tenant would: each test is an attack made from inside a
 * real container (real namespaces, cgroups, seccomp) on a real worker, or through the worker's
 * ExecutionService, and checks that it fails.
 */
import { expect } from 'chai';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect, createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { status } from '@grpc/grpc-js';
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
import { hostAddress, listenOn } from '../support/network.js';

/** Tries TCP connections from inside the container; says what each one got. */
const CONNECT = py`
  import socket
  def connect(targets):
      out = {}
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

describe('tenant isolation: attacks from inside a container', function () {
  this.timeout(90_000);
  let harness: Harness;
  let stateRoot: string;
  let hidden: string;
  let hostServer: Server | null = null;
  let abstract: Server | null = null;

  before(async () => {
    // State outside /tmp (a container's /tmp is its own tmpfs, which would hide it anyway), and
    // a second directory readable by anyone: only the mask keeps containers out of it.
    stateRoot = mkdtempSync('/var/tmp/rw-isolation-');
    chmodSync(stateRoot, 0o755);
    hidden = join(stateRoot, 'cluster-root');
    mkdirSync(hidden, { mode: 0o755 });
    writeFileSync(join(hidden, 'router.log'), 'sess-secret', { mode: 0o644 });
    harness = await startHarness({
      flags: { stateDir: join(stateRoot, 'worker'), hide: hidden },
    });
  });
  after(async () => {
    await harness?.stop();
    hostServer?.close();
    abstract?.close();
    rmSync(stateRoot, { recursive: true, force: true });
    cleanTempDirs();
  });

  it("cannot reach the worker's or the router's port, nor anything else on the host", async () => {
    hostServer = await listenOn('0.0.0.0');
    const port = (hostServer.address() as { port: number }).port;
    const routerPort = Number(harness.router.address.split(':').at(-1));
    const targets: [string, number][] = [
      ['127.0.0.1', harness.worker.port],
      ['127.0.0.1', routerPort],
      ['127.0.0.1', port],
    ];
    const address = hostAddress();
    if (address) targets.push([address, port], [address, harness.worker.port]);
    const result = await execute(
      harness.client,
      header({}),
      jsonCall(CONNECT, 'connect', [targets]),
    );
    const outcomes = envelopeOf(result).value as Record<string, string>;
    for (const [host, target] of targets) {
      // Its own loopback refuses (nothing listens there); the host's addresses are unreachable.
      expect(outcomes[`${host}:${target}`], `${host}:${target}`).to.match(
        /^(ConnectionRefusedError:111|OSError:101)$/,
      );
    }
    // The same server, from the host: it does listen.
    const fromHost = await new Promise<boolean>((resolve) => {
      const socket = connect({ host: '127.0.0.1', port }, () => {
        socket.destroy();
        resolve(true);
      });
      socket.on('error', () => resolve(false));
    });
    expect(fromHost).to.equal(true);
  });

  it("cannot reach the host's abstract unix sockets (they belong to the host's network namespace)", async () => {
    const name = `readie-test-${process.pid}`;
    abstract = createServer(() => undefined);
    await new Promise<void>((resolve) => abstract!.listen(`\0${name}`, resolve));
    const source = py`
      import socket
      def dial(name):
          s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
          try:
              s.connect(chr(0) + name)
              return "connected"
          except OSError as error:
              return error.errno
    `;
    const result = await execute(harness.client, header({}), jsonCall(source, 'dial', [name]));
    expect(envelopeOf(result), JSON.stringify(envelopeOf(result))).to.deep.equal({
      ok: true,
      value: 111,
    });
  });

  it("cannot resume another session's container through the worker (PERMISSION_DENIED)", async () => {
    const remember = py`
      secret = None
      def remember(value):
          global secret
          secret = value
          return "kept"
    `;
    const victim = await execute(
      harness.client,
      header({ ids: { sessionId: 'sess-victim' } }),
      jsonCall(remember, 'remember', ['victim-data']),
    );
    expect(envelopeOf(victim).value).to.equal('kept');
    const containerId = victim.ids!.containerId;
    const steal = 'def steal():\n    return globals().get("secret")\n';
    for (const sessionId of ['sess-attacker', '']) {
      const attack = await execute(
        harness.client,
        header({ ids: { sessionId, containerId } }),
        jsonCall(steal, 'steal'),
      );
      expect(attack.code, sessionId).to.equal(status.PERMISSION_DENIED);
      expect(attack.details).to.include(containerId);
    }
    // The victim's session is untouched.
    const again = await execute(
      harness.client,
      header({ ids: { sessionId: 'sess-victim', containerId } }),
      jsonCall(steal, 'steal'),
    );
    expect(envelopeOf(again).value).to.equal('victim-data');
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
    const paths = [
      stateDir,
      join(stateDir, 'containers'),
      hidden,
      '/sys/fs/cgroup',
      '/sys/fs/cgroup/memory',
    ];
    const result = await execute(
      harness.client,
      header({ ids: { sessionId: 'sess-look' } }),
      jsonCall(source, 'look', [paths]),
    );
    const seen = envelopeOf(result).value as Record<string, unknown>;
    expect(seen[stateDir]).to.deep.equal([]);
    expect(seen[join(stateDir, 'containers')]).to.equal(2); // ENOENT: masked
    expect(seen[hidden]).to.deep.equal([]);
    expect(seen['/sys/fs/cgroup']).to.deep.equal([]);
    // Its cgroup namespace's root is its own cgroup: no worker or container ID in sight.
    expect(seen['cgroup']).to.deep.equal(['/']);
  });

  it("runs each container as its own uid, so one cannot open another's files, pty or keyring", async () => {
    const hold = py`
      import os
      ptys = []
      def hold():
          leader, follower = os.openpty()
          ptys.append((leader, follower))
          return {"uid": os.getuid(), "gid": os.getgid(), "pty": os.ttyname(follower),
                  "pts": sorted(os.listdir("/dev/pts"))}
    `;
    const first = await execute(
      harness.client,
      header({ ids: { sessionId: 'sess-pty' } }),
      jsonCall(hold, 'hold'),
    );
    const holder = envelopeOf(first).value as { uid: number; gid: number; pty: string };
    const probe = py`
      import ctypes, os, seccomp
      libc = ctypes.CDLL(None, use_errno=True)
      def number(name):
          return seccomp.resolve_syscall(seccomp.Arch.NATIVE, name)
      def probe(pty):
          out = {"uid": os.getuid(), "pts": sorted(os.listdir("/dev/pts"))}
          try:
              os.close(os.open(pty, os.O_RDWR | os.O_NOCTTY))
              out["open"] = "opened"
          except OSError as error:
              out["open"] = error.errno
          # keyctl(KEYCTL_GET_KEYRING_ID, KEY_SPEC_USER_KEYRING, 0) and add_key("user", ...).
          ctypes.set_errno(0)
          out["keyctl"] = (libc.syscall(number("keyctl"), 0, -4, 0), ctypes.get_errno())
          ctypes.set_errno(0)
          out["add_key"] = (libc.syscall(number("add_key"), b"user", b"stolen", b"x", 1, -4), ctypes.get_errno())
          return out
    `;
    const second = await execute(
      harness.client,
      header({}),
      jsonCall(probe, 'probe', [holder.pty]),
    );
    const attacker = envelopeOf(second).value as Record<string, unknown>;
    const { first: firstUid, count } = harness.worker.options.sandbox.uids;
    for (const uid of [holder.uid, attacker['uid'] as number]) {
      expect(uid).to.be.within(firstUid, firstUid + count - 1);
    }
    expect(attacker['uid']).not.to.equal(holder.uid);
    expect(holder.gid).to.equal(holder.uid);
    // Its own devpts instance holds only its own terminals: the holder's /dev/pts/0 is not there.
    expect(attacker['pts']).to.deep.equal(['ptmx']);
    expect(attacker['open']).to.equal(2);
    expect(attacker['keyctl']).to.deep.equal([-1, 1]);
    expect(attacker['add_key']).to.deep.equal([-1, 1]);
  });

  it('cannot create a user namespace, mount, ptrace or load kernel modules (seccomp: EPERM)', async () => {
    const source = py`
      import ctypes, os, seccomp, subprocess
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
          out["init_module"] = errno_of(libc.syscall(seccomp.resolve_syscall(seccomp.Arch.NATIVE, "init_module"), None, 0, b""))
          unshare = subprocess.run(["unshare", "--user", "true"], capture_output=True, text=True)
          out["unshare_command"] = [unshare.returncode, unshare.stderr.strip()]
          # A thread (clone without CLONE_NEWUSER) still works.
          import threading
          thread = threading.Thread(target=lambda: None)
          thread.start()
          thread.join()
          out["thread"] = True
          return out
    `;
    const result = await execute(harness.client, header({}), jsonCall(source, 'escape'));
    const out = envelopeOf(result).value as Record<string, unknown>;
    expect(out).to.deep.include({
      unshare_user: 1,
      mount: 1,
      ptrace: 1,
      init_module: 1,
      thread: true,
    });
    expect((out['unshare_command'] as [number, string])[1]).to.include('Operation not permitted');
  });
});
