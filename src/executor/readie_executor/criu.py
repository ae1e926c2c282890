"""The CRIU restore backend's Python side: building a seed image, restoring one container.

Seed (`--criu-seed IMAGES --modules a,b`): process S unshares a pid namespace and forks B, pid 1
there. B imports the modules, says `seeded` on its events pipe (fd 4) and blocks reading its
container spec from fd 3. S dumps B with `criu dump` (which ends B), writes the inodes of B's two
pipes to IMAGES/seed.json and exits 0 (or says `failed` and exits 1).

Restore (`--criu-restore IMAGES --spec JSON`): process R makes two fresh pipes, writes the spec
into one and runs `criu restore` with both inherited in place of the seed's pipes. The restored B
finds its spec on fd 3, reports `spawned` (its host pid) on fd 4 and becomes the container exactly
as a template's fork does (zygote.become_container). R relays B's events to stdout and reports
`exited` when the restore ends; it kills B if the worker dies.
"""

import fcntl
import json
import os
import platform
import select
import signal
import subprocess

from . import sandbox
from .zygote import _describe, become_container, emit, import_checkpoint, reseed

SPEC_FD = 3
EVENTS_FD = 4


def _place(mapping):
    """dup2 each source fd onto its target fd, without one placement clobbering another."""
    high = {target: fcntl.fcntl(source, fcntl.F_DUPFD, 100) for target, source in mapping.items()}
    for target, source in high.items():
        os.dup2(source, target, inheritable=True)
        os.close(source)


def _read_line(fd):
    data = b""
    while not data.endswith(b"\n"):
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        data += chunk
    return data


def _tail(path, lines=3):
    try:
        with open(path, encoding="utf-8", errors="replace") as log:
            return " | ".join(line.strip() for line in log.readlines()[-lines:])
    except OSError as error:
        return f"(no log: {error.strerror})"


def _seed_process(spec_r, events_w, modules):
    """Process B of a seed: imports, waits for its spec; after a restore, becomes a container."""
    try:
        os.setsid()
        sandbox.die_with_parent()
        null = os.open("/dev/null", os.O_RDWR)
        _place({0: null, 1: null, 2: null, SPEC_FD: spec_r, EVENTS_FD: events_w})
        os.closerange(EVENTS_FD + 1, 1 << 16)
        import_checkpoint(modules)
        import gc

        gc.collect()
        gc.freeze()
        emit({"event": "seeded"}, EVENTS_FD)
        line = _read_line(SPEC_FD)  # the dump happens while B waits here
    except BaseException:  # noqa: BLE001
        os._exit(70)
    # Restored: this is a new container.
    spec = json.loads(line)
    container = spec.get("container")
    try:
        sandbox.die_with_parent()
        os.close(SPEC_FD)
        host_pid = int(os.readlink("/proc/self"))  # the host's /proc is still mounted here
        emit({"event": "spawned", "container": container, "pid": host_pid}, EVENTS_FD)
        reseed()
        listener = sandbox.listen(spec["socket"])
    except BaseException as error:  # noqa: BLE001
        emit({"event": "sandbox-failed", "container": container, "error": _describe(error)}, EVENTS_FD)
        os._exit(70)
    become_container(spec, listener, EVENTS_FD)


def seed(images, modules, criu, checkpoint):
    """Process S: builds the seed image in `images`; never returns."""
    os.makedirs(images, exist_ok=True)
    spec_r, spec_w = os.pipe()
    events_r, events_w = os.pipe()
    try:
        sandbox.unshare(sandbox.CLONE_NEWPID)
        pid = os.fork()
    except BaseException as error:  # noqa: BLE001
        emit({"event": "failed", "checkpoint": checkpoint, "error": _describe(error)})
        os._exit(1)
    if pid == 0:
        _seed_process(spec_r, events_w, modules)
    os.close(spec_r)
    os.close(events_w)
    said = _read_line(events_r)
    if b'"seeded"' not in said:
        emit({"event": "failed", "checkpoint": checkpoint, "error": "the seed process died while importing"})
        os._exit(1)
    log = os.path.join(images, "dump.log")
    dump = subprocess.run(
        [criu, "dump", "--tree", str(pid), "--images-dir", images, "--manage-cgroups=ignore", "--log-file", log, "-v2"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=sandbox.die_with_parent,
        check=False,
    )
    if dump.returncode != 0:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        emit({"event": "failed", "checkpoint": checkpoint, "error": f"criu dump exited with {dump.returncode}: {_tail(log)}"})
        os._exit(1)
    with open(os.path.join(images, "seed.json"), "w", encoding="utf-8") as out:
        json.dump(
            {
                "spec": os.fstat(spec_w).st_ino,
                "events": os.fstat(events_r).st_ino,
                "modules": modules,
                "python": platform.python_version(),
            },
            out,
        )
    emit({"event": "ready", "checkpoint": checkpoint, "modules": modules, "python": platform.python_version(), "importMs": 0, "pid": os.getpid()})
    os._exit(0)


def restore(images, spec, criu, worker_pid):
    """Process R: restores one container from `images`, relays its events; never returns."""
    container = spec.get("container")
    try:
        with open(os.path.join(images, "seed.json"), encoding="utf-8") as info:
            inodes = json.load(info)
        spec = dict(spec, modules=inodes.get("modules", []))
        spec_r, spec_w = os.pipe()
        events_r, events_w = os.pipe()
        os.write(spec_w, (json.dumps(spec) + "\n").encode("utf-8"))
        os.close(spec_w)
        log = os.path.join(os.path.dirname(spec["tmpDir"]), "criu-restore.log")
        pid = os.fork()
    except BaseException as error:  # noqa: BLE001
        emit({"event": "spawn-failed", "container": container, "error": _describe(error)})
        os._exit(1)
    if pid == 0:
        try:
            sandbox.die_with_parent()
            _place({SPEC_FD: spec_r, EVENTS_FD: events_w})
            os.closerange(EVENTS_FD + 1, 1 << 16)
            os.execv(
                criu,
                [
                    criu,
                    "restore",
                    "--images-dir",
                    images,
                    "--manage-cgroups=ignore",
                    "--inherit-fd",
                    f"fd[{SPEC_FD}]:pipe:[{inodes['spec']}]",
                    "--inherit-fd",
                    f"fd[{EVENTS_FD}]:pipe:[{inodes['events']}]",
                    "--log-file",
                    log,
                    "-v2",
                ],
            )
        finally:
            os._exit(127)
    os.close(spec_r)
    os.close(events_w)
    container_pid = _relay(events_r, pid, worker_pid)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if container_pid is None:
        emit({"event": "spawn-failed", "container": container, "error": f"criu restore exited with {code}: {_tail(log)}"})
        os._exit(1)
    # criu restore exits with the restored task's status; 128+n is the shells' "killed by signal n".
    emit(
        {
            "event": "exited",
            "container": container,
            "pid": container_pid,
            "code": code if 0 <= code < 128 else None,
            "signal": code - 128 if code >= 128 else (-code if code < 0 else None),
        }
    )
    os._exit(0)


def _relay(events_r, criu_pid, worker_pid):
    """Forwards B's events until criu's restore ends; returns B's host pid if it reported one."""
    container_pid = None
    pending = b""

    def forward(chunk):
        nonlocal pending, container_pid
        pending += chunk
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if event.get("event") == "spawned":
                container_pid = event.get("pid")
            os.write(1, line + b"\n")

    poller = select.poll()
    poller.register(events_r, select.POLLIN)
    criu_fd = os.pidfd_open(criu_pid)
    poller.register(criu_fd, select.POLLIN)
    worker_fd = None
    if worker_pid:
        try:
            worker_fd = os.pidfd_open(worker_pid)
            poller.register(worker_fd, select.POLLIN)
        except ProcessLookupError:
            os.kill(criu_pid, signal.SIGKILL)
    events_open = True
    while True:
        ready = dict(poller.poll())
        if worker_fd is not None and worker_fd in ready:
            for victim in (container_pid, criu_pid):
                if victim:
                    try:
                        os.kill(victim, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
            poller.unregister(worker_fd)
            worker_fd = None
        if events_open and events_r in ready:
            chunk = os.read(events_r, 65536)
            if chunk:
                forward(chunk)
            else:
                poller.unregister(events_r)
                events_open = False
        if criu_fd in ready:
            break
    # criu waits for the restored task, so every writer of the events pipe is gone by now.
    while events_open:
        chunk = os.read(events_r, 65536)
        if not chunk:
            break
        forward(chunk)
    return container_pid
