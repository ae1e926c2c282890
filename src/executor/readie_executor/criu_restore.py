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

The launcher keeps one spare R per image, forked after the previous one was taken: it has read
the image's seed.json, opened its watch on the worker and (for a lazy image) started its page
server in a work directory of its own beside the image, and it waits for its spec on a pipe. A
restore then starts at `criu restore`. A spare whose image was dumped again is never used (the
launcher keys spares by the image's seed digest) and exits; so does every spare once the
launcher's stdin closes.
"""

import json
import os
import platform
import select
import shutil
import signal
import sys
import tempfile
import time

from . import sandbox
from .criu import EVENTS_FD, SPEC_FD, _kill, _place, _tail, _wait_exit
from .zygote import _describe, emit

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


class _Prepared:
    """What R readies before it knows its container: the seed's record, the worker's pidfd and,
    for a lazy image, its running page server and that server's work directory."""

    def __init__(self, images, lazy, criu, worker_pid, lazy_dir):
        self.lazy_pid = None
        self.lazy_dir = lazy_dir
        with open(os.path.join(images, "seed.json"), encoding="utf-8") as info:
            self.seeded = json.load(info)
        self.worker_fd = _pidfd(worker_pid)
        if lazy:
            # Outside the container's cgroup: its pages are charged to the container all the same
            # (they are the restored process's), and the container's OOM kill never picks it.
            self.lazy_pid = _start_lazy_pages(criu, images, lazy_dir)

    def discard(self):
        _kill(self.lazy_pid)
        self.lazy_pid = None
        self.remove_lazy_dir()

    def remove_lazy_dir(self):
        if self.lazy_dir is not None and "+lazy-" in os.path.basename(self.lazy_dir):
            shutil.rmtree(self.lazy_dir, ignore_errors=True)


def _lazy_dir(images):
    # Beside the image ('+' marks it as no image: a worker's start removes such leftovers).
    return tempfile.mkdtemp(prefix=os.path.basename(images) + "+lazy-", dir=os.path.dirname(images))


def spare(images, lazy, criu, worker_pid, command_fd):
    """A spare process R: readies a restore of `images`, then waits for its spec on `command_fd`
    and restores it; exits once that pipe closes without one. Never returns."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    try:
        prepared = _Prepared(images, lazy, criu, worker_pid, _lazy_dir(images) if lazy else None)
    except BaseException:  # noqa: BLE001 - the restore that takes it would fail: there is none yet
        os._exit(1)
    line = b""
    try:
        with os.fdopen(command_fd, "rb") as commands:
            line = commands.readline()
        spec = json.loads(line)
    except BaseException:  # noqa: BLE001 - the launcher closed the pipe: not needed any more
        prepared.discard()
        os._exit(0)
    _restore(images, spec, criu, prepared)


def restore(images, spec, criu, worker_pid):
    """Process R, readied for its spec: restores one container from `images`; never returns."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    try:
        workdir = os.path.dirname(spec["socket"])
        prepared = _Prepared(images, bool(spec.get("criuLazy")), criu, worker_pid, workdir)
    except BaseException as error:  # noqa: BLE001
        emit({"event": "spawn-failed", "container": spec.get("container"), "error": _describe(error)})
        os._exit(1)
    _restore(images, spec, criu, prepared)


def _restore(images, spec, criu, prepared):
    """Restores one container from `images` with what R readied, relays its events; never returns."""
    container = spec.get("container")
    seeded, worker_fd, lazy_pid = prepared.seeded, prepared.worker_fd, prepared.lazy_pid
    try:
        spec = {key: value for key, value in spec.items() if key not in ("criuImages", "criuLazy", "criuImage")}
        spec["modules"] = seeded.get("modules", [])
        workdir = os.path.dirname(spec["socket"])
        log = os.path.join(workdir, "criu-restore.log")
        pidfile = os.path.join(workdir, "criu-restore.pid")
        lazy_log = os.path.join(workdir, "criu-lazy-pages.log")
        # A lazy restore finds its page server's socket in its work directory.
        criu_workdir = prepared.lazy_dir if lazy_pid else workdir
        if lazy_pid and criu_workdir != workdir:
            # The server keeps writing to it: its log goes with the container's files.
            os.rename(os.path.join(criu_workdir, "criu-lazy-pages.log"), lazy_log)
        spec_r, spec_w = os.pipe()
        events_r, events_w = os.pipe()
        os.write(spec_w, (json.dumps(spec) + "\n").encode("utf-8"))
        os.close(spec_w)
        criu_pid = os.fork()
    except BaseException as error:  # noqa: BLE001
        prepared.discard()
        emit({"event": "spawn-failed", "container": container, "error": _describe(error)})
        os._exit(1)
    if criu_pid == 0:
        try:
            # The restored pages are charged to the cgroup criu runs in: the container's.
            sandbox.join_cgroups(spec)
            _place({SPEC_FD: spec_r, EVENTS_FD: events_w})
        except BaseException:  # noqa: BLE001
            os._exit(126)
        _exec_quietly(
            [
                criu,
                "restore",
                "--images-dir",
                images,
                "--work-dir",
                criu_workdir,
                "--restore-detached",
                "--restore-sibling",
                "--pidfile",
                pidfile,
                "--manage-cgroups=ignore",
                "--inherit-fd",
                f"fd[{SPEC_FD}]:pipe:[{seeded['spec']}]",
                "--inherit-fd",
                f"fd[{EVENTS_FD}]:pipe:[{seeded['events']}]",
                "--log-file",
                log,
                "-v2",
                *(["--lazy-pages"] if lazy_pid else []),
            ]
        )
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
        prepared.discard()
        emit({"event": "spawn-failed", "container": container, "error": f"criu restore exited with {code}: {_tail(log)}"})
        os._exit(1)
    reported = _watch(events_r, container, pid, worker_fd, lazy_pid, lazy_log)
    prepared.remove_lazy_dir()
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


def _pidfd(pid):
    if not pid:
        return None
    try:
        return os.pidfd_open(pid)
    except ProcessLookupError:
        os._exit(1)  # the worker is gone: restore nothing


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


def _fork_spare(images, lazy, criu, worker_pid, others):
    """Forks a spare R for `images`; returns the write end of its command pipe, or None.

    `others` are the other spares' pipes: a spare holding one open would keep that spare from
    ever seeing it close."""
    command_r, command_w = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        os.close(command_r)
        os.close(command_w)
        return None
    if pid == 0:
        try:
            os.close(command_w)
            for other in others:
                os.close(other)
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.close(null)
            spare(images, lazy, criu, worker_pid, command_r)
        finally:
            os._exit(1)
    os.close(command_r)
    return command_w


def _hand_to_spare(command_w, spec):
    """Gives `spec` to a spare R; False if that spare is gone (its pipe is broken)."""
    try:
        os.write(command_w, (json.dumps(spec) + "\n").encode("utf-8"))
        return True
    except OSError:
        return False
    finally:
        os.close(command_w)


def serve_launcher(criu, worker_pid):
    """The resident launcher: restores a container per `spawn` command on stdin, through the
    spare R of its image (forking one if there is none), and forks the next spare; never returns."""
    # Children are restorers; auto-reap them (each reports its container itself).
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    emit({"event": "ready", "checkpoint": "", "modules": [], "python": platform.python_version(), "importMs": 0, "pid": os.getpid()})
    # (images dir, lazy) -> (the image's seed digest, the spare's command pipe)
    spares = {}
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
        images, lazy, digest = spec["criuImages"], bool(spec.get("criuLazy")), spec.get("criuImage", "")
        kept = spares.pop((images, lazy), None)
        handed = False
        if kept is not None:
            kept_digest, command_w = kept
            if kept_digest == digest and digest:
                handed = _hand_to_spare(command_w, spec)
            else:
                os.close(command_w)  # readied for an image dumped since: it exits
        if not handed:
            try:
                pid = os.fork()
            except OSError as error:
                emit({"event": "spawn-failed", "container": spec.get("container"), "error": _describe(error)})
                continue
            if pid == 0:
                try:
                    null = os.open(os.devnull, os.O_RDONLY)
                    os.dup2(null, 0)
                    os.close(null)
                    for _, other in spares.values():
                        os.close(other)
                    restore(images, spec, criu, worker_pid)
                finally:
                    os._exit(1)
        if digest:
            command_w = _fork_spare(images, lazy, criu, worker_pid, [fd for _, fd in spares.values()])
            if command_w is not None:
                spares[(images, lazy)] = (digest, command_w)
    os._exit(0)
