"""Restoring containers from a CRIU image (`--criu-launcher`).

The launcher is a small resident process that reads `spawn` commands (JSON lines with a container
spec and its `criuImages`) on stdin and forks one restorer R per command, so a restore does not
pay for starting Python.

R makes two fresh pipes, writes the spec into one and runs `criu restore` with both inherited in
place of the seed's pipes, detached, the restored task R's own child; criu runs in the container's
memory cgroup, so the restored memory is charged to the container. The restored B (see
criu_seed.py) reports `spawned` and enters its sandbox; R relays B's events to stdout, reports
`exited` when B ends, and kills B if the worker dies. A large image (`criuLazy`) restores lazily:
R first starts `criu lazy-pages`, which serves B's memory on demand, and kills B should that
server fail before serving all of it.
"""

import json
import os
import platform
import select
import signal
import sys
import time

from . import image_restore, sandbox
from .criu import EVENTS_FD, SPEC_FD, _kill, _kill_cgroup_members, _pidfd, _place, _tail, _wait_exit, host_kdat, restore_argv
from .container import describe, emit

# How long R waits, once B is gone, for B's lazy-pages server to be seen gone too (in seconds).
LAZY_EXIT_GRACE = 0.2


def _exec_quietly(argv):
    """In a forked child: runs `argv` with fds 0-2 on /dev/null (never on the launcher's event
    stream) and fds 3-4 kept for criu to hand over; never returns."""
    try:
        sandbox.die_with_parent()
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.closerange(EVENTS_FD + 1, 1 << 16)
        os.execv(argv[0], argv)
    finally:
        os._exit(127)


def _start_lazy_pages(criu, images, workdir):
    """Starts `criu lazy-pages`, which serves the restored memory on demand; returns its pid once
    its socket exists."""
    socket_path = os.path.join(workdir, "lazy-pages.socket")
    log = os.path.join(workdir, "criu-lazy-pages.log")
    pid = os.fork()
    if pid == 0:
        os.closerange(3, EVENTS_FD + 1)
        _exec_quietly([criu, "lazy-pages", "--images-dir", images, "--work-dir", workdir, "--log-file", log, "-v2"])
    deadline = time.monotonic() + 10
    while not os.path.exists(socket_path):
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            raise RuntimeError(f"criu lazy-pages exited with {os.waitstatus_to_exitcode(status)}: {_tail(log)}")
        if time.monotonic() > deadline:
            _kill(pid)
            raise RuntimeError("criu lazy-pages did not start within 10 s")
        time.sleep(0.0005)
    return pid


def restore(images, spec, criu, worker_pid):
    """Process R: restores one container from `images`, relays its events; never returns."""
    container = spec.get("container")
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    lazy_pid = None
    try:
        with open(os.path.join(images, "seed.json"), encoding="utf-8") as info:
            seeded = json.load(info)
        lazy = bool(spec.get("criuLazy"))
        spec = {key: value for key, value in spec.items() if key not in ("criuImages", "criuLazy")}
        spec["restoredFrom"] = images
        spec["modules"] = seeded.get("modules", [])
        workdir = os.path.dirname(spec["socket"])
        log = os.path.join(workdir, "criu-restore.log")
        pidfile = os.path.join(workdir, "criu-restore.pid")
        worker_fd = _pidfd(worker_pid)
        if lazy:
            # Outside the container's cgroup: its pages are charged to the container all the same
            # (they are the restored process's), and the container's OOM kill never picks it.
            lazy_pid = _start_lazy_pages(criu, images, workdir)
        spec_r, spec_w = os.pipe()
        events_r, events_w = os.pipe()
        os.write(spec_w, (json.dumps(spec) + "\n").encode("utf-8"))
        os.close(spec_w)
        criu_pid = os.fork()
    except BaseException as error:  # noqa: BLE001
        _kill(lazy_pid)
        emit({"event": "spawn-failed", "container": container, "error": describe(error)})
        os._exit(1)
    if criu_pid == 0:
        try:
            # The restored pages are charged to the cgroup criu runs in: the container's.
            sandbox.join_cgroups(spec)
            _place({SPEC_FD: spec_r, EVENTS_FD: events_w})
        except BaseException:  # noqa: BLE001
            os._exit(126)
        inherit = {SPEC_FD: f"pipe:[{seeded['spec']}]", EVENTS_FD: f"pipe:[{seeded['events']}]"}
        _exec_quietly(restore_argv(criu, images, workdir, pidfile, log, inherit, *(["--lazy-pages"] if lazy_pid else [])))
    os.close(spec_r)
    os.close(events_w)
    code = _wait_criu(criu_pid, worker_fd)
    pid = None
    if code == 0:
        try:
            with open(pidfile, encoding="ascii") as pid_text:
                pid = int(pid_text.read().strip())
        except (OSError, ValueError):
            pid = None
    if pid is None:
        _kill(lazy_pid)
        # A criu killed mid-restore (its worker died) leaves the tasks it was restoring stopped
        # for good, where no signal but SIGKILL reaches them: they are in the container's cgroups.
        _kill_cgroup_members(spec)
        emit({"event": "spawn-failed", "container": container, "error": f"criu restore exited with {code}: {_tail(log)}"})
        os._exit(1)
    reported = _watch(events_r, container, pid, worker_fd, lazy_pid, os.path.join(workdir, "criu-lazy-pages.log"))
    code = _wait_exit(pid)
    if not reported:
        emit({"event": "spawned", "container": container, "pid": pid})
    emit(
        {
            "event": "exited",
            "container": container,
            "pid": pid,
            "code": code if code >= 0 else None,
            "signal": -code if code < 0 else None,
        }
    )
    os._exit(0)


def _wait_criu(criu_pid, worker_fd):
    """Waits for `criu restore` (which returns once the container runs); kills it if the worker dies."""
    criu_fd = os.pidfd_open(criu_pid)
    poller = select.poll()
    poller.register(criu_fd, select.POLLIN)
    if worker_fd is not None:
        poller.register(worker_fd, select.POLLIN)
    while True:
        ready = dict(poller.poll())
        if worker_fd is not None and worker_fd in ready:
            _kill(criu_pid)
            poller.unregister(worker_fd)
            worker_fd = None
        if criu_fd in ready:
            os.close(criu_fd)
            return _wait_exit(criu_pid)


def _watch(events_r, container, pid, worker_fd, lazy_pid, lazy_log):
    """Relays B's events until B exits; kills B if the worker dies, or if its lazy-pages server
    fails before serving all its memory (B would then read zeroes where its memory was).

    Returns whether B reported itself `spawned`."""
    spawned = False
    pending = b""

    def forward(chunk):
        nonlocal pending, spawned
        pending += chunk
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if event.get("event") == "spawned":
                spawned = True
            os.write(1, line + b"\n")

    poller = select.poll()
    child_fd = os.pidfd_open(pid)
    poller.register(child_fd, select.POLLIN)
    poller.register(events_r, select.POLLIN)
    if worker_fd is not None:
        poller.register(worker_fd, select.POLLIN)
    lazy_fd = os.pidfd_open(lazy_pid) if lazy_pid else None
    if lazy_fd is not None:
        poller.register(lazy_fd, select.POLLIN)
    events_open = True
    while True:
        ready = dict(poller.poll())
        if worker_fd is not None and worker_fd in ready:
            _kill(pid)
            poller.unregister(worker_fd)
            worker_fd = None
        if lazy_fd is not None and lazy_fd in ready:
            poller.unregister(lazy_fd)
            lazy_fd = None
            code = _wait_exit(lazy_pid)
            if code != 0:
                _kill(pid)
                error = f"the lazy-pages server of its restore failed (exit {code}): {_tail(lazy_log)}"
                emit({"event": "sandbox-failed", "container": container, "error": error})
        if events_open and events_r in ready:
            chunk = os.read(events_r, 65536)
            if chunk:
                forward(chunk)
            else:
                poller.unregister(events_r)
                events_open = False
        if child_fd in ready:
            break
    if lazy_fd is not None and select.select([lazy_fd], [], [], LAZY_EXIT_GRACE)[0]:
        # B died of its server's death (its page faults went unanswered), which the kernel may
        # announce a moment after B's: say so, not only how B died.
        code = _wait_exit(lazy_pid)
        lazy_fd = None
        if code != 0:
            error = f"the lazy-pages server of its restore failed (exit {code}): {_tail(lazy_log)}"
            emit({"event": "sandbox-failed", "container": container, "error": error})
    if lazy_fd is not None:
        # B is gone before all of its memory was served: the server has nothing left to do.
        signal.pidfd_send_signal(lazy_fd, signal.SIGKILL)
        _wait_exit(lazy_pid)
    # B is gone, and with it every writer of the events pipe.
    while events_open:
        chunk = os.read(events_r, 65536)
        if not chunk:
            break
        forward(chunk)
    os.close(events_r)
    return spawned


def serve_launcher(criu, worker_pid):
    """The resident launcher: forks a restorer per `spawn` command on stdin; never returns."""
    # Children are restorers; auto-reap them (each reports its container itself).
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    emit({"event": "ready", "checkpoint": "", "modules": [], "python": platform.python_version(), "importMs": 0, "pid": os.getpid()})
    kdat = None  # criu's feature cache for restores inside a sandbox, read at the first of them
    for line in sys.stdin.buffer:
        try:
            command = json.loads(line)
        except ValueError:
            continue
        if command.get("op") == "exit":
            break
        if command.get("op") != "spawn":
            continue
        spec = command["spec"]
        try:
            if spec.get("imageSnapshot") and kdat is None:
                kdat = host_kdat(criu)
            pid = os.fork()
        except OSError as error:
            emit({"event": "spawn-failed", "container": spec.get("container"), "error": describe(error)})
            continue
        if pid == 0:
            try:
                null = os.open(os.devnull, os.O_RDONLY)
                os.dup2(null, 0)
                os.close(null)
                if spec.get("imageSnapshot"):
                    image_restore.restore_snapshot(spec["criuImages"], spec, criu, kdat, worker_pid)
                restore(spec["criuImages"], spec, criu, worker_pid)
            finally:
                os._exit(1)
    os._exit(0)
