"""Restoring a container from an image snapshot (image_seed.py), for the CRIU launcher.

R (the launcher's fork, root) binds the container's socket on the host, unshares a pid
namespace and forks I, its pid 1. I makes the container's namespaces and filesystem exactly as
the seed's I did (sandbox.enter_namespaces), then runs `criu restore` there, handing it three
fds in place of the seed's: the spec pipe (fd 3), the events pipe (fd 4) and the real listening
socket (fd 5). B comes back as it was dumped: the image's uid, its seccomp filter, the image's
modules imported. I writes B's spec, waits for it, and reports how it ended to R, which reports
to the worker.

B ran the tenant's packages' code before its dump, so nothing B says is trusted: R forwards
only B's `spawned` for this container (with I's host pid: B's network namespace is I's), and
nothing B does reaches beyond its sandbox, which it never left.
"""

import fcntl
import json
import os
import select
import signal

from . import command_line, sandbox
from .container import describe, emit, fresh_main, reseed
from .criu import (
    EVENTS_FD,
    LISTENER_FD,
    SPEC_FD,
    _kill,
    _kill_cgroup_members,
    _pidfd,
    _place,
    _tail,
    _wait_exit,
    _read_event,
    place_kdat,
    restore_argv,
)

# The first pid criu's own processes take in I's namespace: B comes back as the pid it had.
_CRIU_PIDS_FROM = 100
# The most bytes of B's events R reads into one line (B's `spawned` is far shorter).
_MAX_EVENT_LINE = 4096


def restore_snapshot(images, spec, criu, kdat, worker_pid):
    """Process R: restores one container from an image snapshot (`kdat`: the host's criu feature
    cache, read once by the launcher); never returns."""
    container = spec.get("container")
    # The launcher auto-reaps its children; R and I wait for theirs.
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    try:
        with open(os.path.join(images, "seed.json"), encoding="utf-8") as info:
            seeded = json.load(info)
        spec = {key: value for key, value in spec.items() if key not in ("criuImages", "criuLazy", "imageSnapshot")}
        spec["restoredFrom"] = images
        spec["modules"] = seeded.get("modules", [])
        workdir = os.path.dirname(spec["socket"])
        worker_fd = _pidfd(worker_pid)
        listener = sandbox.listen(spec["socket"])
        # Above the fds criu is handed (3-5), which its child places before it execs criu.
        fds = {name: _high(os.open(path, os.O_RDONLY | os.O_DIRECTORY)) for name, path in (("images", images), ("work", workdir))}
        spec_r, spec_w = os.pipe()
        events_r, events_w = os.pipe()
        status_r, status_w = os.pipe()
        sandbox.unshare(sandbox.CLONE_NEWPID)
        init = os.fork()
    except BaseException as error:  # noqa: BLE001
        emit({"event": "spawn-failed", "container": container, "error": describe(error)})
        os._exit(1)
    if init == 0:
        try:
            os.close(events_r)
            os.close(status_r)
            _restore_init(spec, seeded, criu, kdat, fds, listener.fileno(), spec_r, spec_w, events_w, status_w)
        except BaseException as error:  # noqa: BLE001
            _report(status_w, {"failed": describe(error)})
        os._exit(1)
    for fd in (spec_r, spec_w, events_w, status_w, *fds.values()):
        os.close(fd)
    listener.close()
    spawned = _watch(events_r, container, init, worker_fd)
    code = _wait_exit(init)
    status = _read_event(status_r)
    if "failed" in status:
        _kill_cgroup_members(spec)
        emit({"event": "spawn-failed" if not spawned else "sandbox-failed", "container": container, "error": str(status["failed"])})
        if not spawned:
            os._exit(1)
    elif not spawned:
        emit({"event": "spawned", "container": container, "pid": init})
    b_code = status.get("code") if isinstance(status.get("code"), int) else None
    b_signal = status.get("signal") if isinstance(status.get("signal"), int) else None
    if b_code is None and b_signal is None:
        b_code, b_signal = (code, None) if code >= 0 else (None, -code)
    emit({"event": "exited", "container": container, "pid": init, "code": b_code, "signal": b_signal})
    os._exit(0)


def _high(fd):
    high = fcntl.fcntl(fd, fcntl.F_DUPFD, 100)  # inheritable: criu opens them by /proc/self/fd
    os.close(fd)
    return high


def _report(fd, status):
    try:
        os.write(fd, (json.dumps(status) + "\n").encode("utf-8"))
    except OSError:
        pass


def _restore_init(spec, seeded, criu, kdat, fds, listener, spec_r, spec_w, events_w, status_w):
    """Process I (pid 1 of the container, root): the sandbox, criu restore, B's spec, B's end."""
    sandbox.die_with_parent()
    container = spec.get("container")

    def network_ready():
        emit({"event": "network", "container": container})

    # I's own pid namespace's counter (written before the container's /proc/sys is read-only).
    with open("/proc/sys/kernel/ns_last_pid", "w", encoding="ascii") as last:
        last.write(str(_CRIU_PIDS_FROM))
    # Not the worker's session keyring: the one B inherits through criu. (Joined before the
    # sandbox may hide the executor's code, which this imports.)
    sandbox.join_new_session_keyring()
    egress = spec.get("network") == "egress"
    sandbox.enter_namespaces(spec, on_network=network_ready if egress else None)
    place_kdat(kdat)
    images, work = fds["images"], fds["work"]
    pidfile = "criu-restore.pid"
    criu_pid = os.fork()
    if criu_pid == 0:
        try:
            sandbox.die_with_parent()
            _place({SPEC_FD: spec_r, EVENTS_FD: events_w, LISTENER_FD: listener})
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            keep = {SPEC_FD, EVENTS_FD, LISTENER_FD, images, work}
            for fd in os.listdir("/proc/self/fd"):
                if int(fd) > 2 and int(fd) not in keep:
                    try:
                        os.close(int(fd))
                    except OSError:
                        pass
            inherit = {
                SPEC_FD: f"pipe:[{seeded['spec']}]",
                EVENTS_FD: f"pipe:[{seeded['events']}]",
                LISTENER_FD: f"socket:[{seeded['listener']}]",
            }
            os.execv(criu, restore_argv(criu, f"/proc/self/fd/{images}", f"/proc/self/fd/{work}", pidfile, "criu-restore.log", inherit))
        finally:
            os._exit(127)
    os.close(spec_r)
    os.close(events_w)
    os.close(listener)
    # Nothing of the host stays open in I once criu has them: not its directories, not the
    # launcher's event stream (I reports through the status pipe alone from here on).
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    code = _wait_exit(criu_pid)
    pid = None
    if code == 0:
        try:
            with open(f"/proc/self/fd/{work}/{pidfile}", encoding="ascii") as pid_text:
                pid = int(pid_text.read().strip())
        except (OSError, ValueError):
            pid = None
    if pid is None:
        _report(status_w, {"failed": f"criu restore exited with {code}: {_tail(f'/proc/self/fd/{work}/criu-restore.log')}"})
        os._exit(1)
    os.close(images)
    os.close(work)
    os.write(spec_w, (json.dumps(spec) + "\n").encode("utf-8"))
    os.close(spec_w)
    # Pid 1 reaps every orphan of the container until B itself ends.
    while True:
        try:
            ended, status = os.wait()
        except ChildProcessError:
            break
        if ended == pid:
            code = os.waitstatus_to_exitcode(status)
            _report(status_w, {"code": code, "signal": None} if code >= 0 else {"code": None, "signal": -code})
            os._exit(0)
    _report(status_w, {"failed": "the restored container was not I's child"})
    os._exit(1)


def _watch(events_r, container, init, worker_fd):
    """Reads B's events until B says `spawned` (then closes them: anything later is B's code
    talking), and waits for I to exit; kills I (and with it the container) if the worker dies.

    Returns whether `spawned` was reported (R says it, with I's pid, when B says it)."""
    spawned = False
    pending = b""
    poller = select.poll()
    init_fd = os.pidfd_open(init)
    poller.register(init_fd, select.POLLIN)
    poller.register(events_r, select.POLLIN)
    if worker_fd is not None:
        poller.register(worker_fd, select.POLLIN)
    events_open = True

    def close_events():
        nonlocal events_open
        poller.unregister(events_r)
        os.close(events_r)
        events_open = False

    while True:
        ready = dict(poller.poll())
        if worker_fd is not None and worker_fd in ready:
            _kill(init)
            poller.unregister(worker_fd)
            worker_fd = None
        if events_open and events_r in ready:
            chunk = os.read(events_r, 65536)
            pending = (pending + chunk)[-_MAX_EVENT_LINE:] if b"\n" not in chunk else pending + chunk
            while b"\n" in pending and not spawned:
                line, pending = pending.split(b"\n", 1)
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if isinstance(event, dict) and event.get("event") == "spawned" and event.get("container") == container:
                    spawned = True
                    emit({"event": "spawned", "container": container, "pid": init})
            pending = pending[-_MAX_EVENT_LINE:]
            if spawned or not chunk:
                close_events()
        if init_fd in ready:
            break
    os.close(init_fd)
    if events_open:
        close_events()
    return spawned


def become_restored(line, image):
    """Process B after a restore: takes the container's spec, then serves calls; never returns."""
    try:
        spec = json.loads(line)
        container = spec.get("container")
        os.close(SPEC_FD)
        command_line.show_restored(spec.get("workerPid") or 0, spec.get("restoredFrom") or "")
        os.environ.clear()
        os.environ.update({str(k): str(v) for k, v in spec.get("env", {}).items()})
        os.environ.update({str(k): str(v) for k, v in (image.get("env") or {}).items()})
        import socket

        listener = socket.socket(fileno=LISTENER_FD)
        emit({"event": "spawned", "container": container, "pid": 0}, EVENTS_FD)
        os.close(EVENTS_FD)
        reseed()
        fresh_main()
        from .capture import OutputCapture
        from .server import Executor

        identity = {
            "container": container,
            "checkpoint": spec.get("checkpoint", ""),
            "modules": spec.get("modules", []),
            "network": spec.get("network", "host") if spec.get("hardened", True) else "host",
        }
        capture = OutputCapture()
        Executor(listener, capture, identity).serve_forever()
    except BaseException:  # noqa: BLE001
        os._exit(71)
    os._exit(0)
